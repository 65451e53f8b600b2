"""`<nagent-read>` in an editor session: confined, from the open buffer when there is one, else the disk."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nagent_lsp.agent.sandbox import Refused, confine_read
from nagent_lsp.config.settings import DEFAULT_DENY_READ
from nagent_lsp.core.limits import INLINE_LIMIT as READ_LIMIT  # larger files go through <nagent-file-read> segments
from nagent_lsp.core.ports import Buffer


class BufferReader(Protocol):
    def read_buffer(self, path: Path) -> Buffer | None: ...


@dataclass(frozen=True)
class ReadOutcome:
    requested: str  # the path as the model wrote it
    path: Path | None  # resolved, when confinement allowed it
    text: str | None = None
    error: str | None = None
    from_buffer: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def read_action(
    path_str: str,
    port: BufferReader,
    workspace_folders: Iterable[Path],
    deny_globs: Iterable[str] = DEFAULT_DENY_READ,
    base: Path | None = None,
    limit: int = READ_LIMIT,
) -> ReadOutcome:
    """Never raises for the model's mistakes: refusals and failures come back as `error` (data for the model)."""
    try:
        path = confine_read(path_str, workspace_folders, deny_globs, base)
    except Refused as exc:
        return ReadOutcome(path_str, None, error=f"read refused: {exc.reason}")
    too_large = (
        f"file too large ({{size}} bytes, the limit is {limit}); "
        f'read it in split segments with <nagent-file-read path="{path_str}"/>'
    )
    buffer = port.read_buffer(path)
    if buffer is not None:
        size = len(buffer.text.encode("utf-8"))
        if size > limit:
            return ReadOutcome(path_str, path, error=too_large.format(size=size), from_buffer=True)
        return ReadOutcome(path_str, path, text=buffer.text, from_buffer=True)
    try:
        if path.is_dir():
            return ReadOutcome(path_str, path, error="is a directory, not a file")
        size = path.stat().st_size  # checked before reading so a huge file is never loaded
        if size > limit:
            return ReadOutcome(path_str, path, error=too_large.format(size=size))
        data = path.read_bytes()
    except FileNotFoundError:
        return ReadOutcome(path_str, path, error="file not found")
    except OSError as exc:
        return ReadOutcome(path_str, path, error=exc.strerror or str(exc))
    try:
        # newline="" semantics: CRLF reaches the model as it is on disk.
        return ReadOutcome(path_str, path, text=data.decode("utf-8"))
    except UnicodeDecodeError:
        return ReadOutcome(path_str, path, error="not a UTF-8 text file")
