"""Reading a file the way the user sees it: the editor's buffer when open, else the exact text on disk.

One reader for every workflow and port, so CRLF, a missing final newline and encoding errors are treated
the same everywhere (text is never newline-translated).
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.core.ports import Buffer, EditorPort
from nagent_lsp.store.files import read_disk_text


def read_source(port: EditorPort | None, path: Path) -> Buffer:
    """The buffer the user sees, else the disk text (version None)."""
    buffer = port.read_buffer(path) if port is not None else None
    if buffer is not None:
        return buffer
    return Buffer(path=path, text=read_disk_text(path, missing_ok=False), version=None, uri=path.as_uri())
