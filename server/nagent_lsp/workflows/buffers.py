"""Reading a file the way the user sees it: the editor's buffer when open, else the exact text on disk.

One reader for every workflow and port, so CRLF, a missing final newline and encoding errors are treated
the same everywhere (text is never newline-translated).
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.workflows.errors import UserError
from nagent_lsp.workflows.port import Buffer, EditorPort


def read_disk_text(path: Path, missing_ok: bool = True) -> str:
    """The file's exact text ("" when it does not exist and `missing_ok`); a UserError when it is not UTF-8."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return ""
        raise UserError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"not a file: {path}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_source(port: EditorPort | None, path: Path) -> Buffer:
    """The buffer the user sees, else the disk text (version None)."""
    buffer = port.read_buffer(path) if port is not None else None
    if buffer is not None:
        return buffer
    return Buffer(path=path, text=read_disk_text(path, missing_ok=False), version=None, uri=path.as_uri())
