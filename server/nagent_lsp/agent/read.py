"""`<nagent-read>` in an editor session: confined, from the open buffer when there is one, else the disk."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.config.settings import DEFAULT_DENY_READ, DEFAULT_MAX_FILE_BYTES
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
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ReadOutcome:
    """`read_with` under the rules made of these folders, globs and maxFileBytes."""
    return read_with(ReadRules.of(workspace_folders, deny_globs, max_file_bytes), path_str, port, base, limit)


def read_with(
    rules: ReadRules, path_str: str, port: BufferReader, base: Path | None = None, limit: int = READ_LIMIT
) -> ReadOutcome:
    """Never raises for the model's mistakes: refusals and failures come back as `error` (data for the model)."""
    try:
        path = rules.confine(path_str, base)
    except Refused as exc:
        return ReadOutcome(path_str, None, error=f"read refused: {exc.reason}")
    too_large = (
        f"file too large ({{size}} bytes, the limit is {limit}); "
        f'read it in split segments with <nagent-file-read path="{path_str}"/>'
    )
    buffer = port.read_buffer(path)
    if buffer is not None:
        size = len(buffer.text.encode("utf-8", "surrogatepass"))
        if size > limit:
            return ReadOutcome(path_str, path, error=too_large.format(size=size), from_buffer=True)
        return ReadOutcome(path_str, path, text=buffer.text, from_buffer=True)
    try:
        # The bounded reader checks the kind and size before opening: a FIFO (whose size reads 0) is refused,
        # a huge file is never loaded.
        return ReadOutcome(path_str, path, text=rules.read_text(path, limit))
    except Refused as exc:
        if exc.kind == "size" and exc.size is not None:
            if exc.size <= rules.max_bytes:
                return ReadOutcome(path_str, path, error=too_large.format(size=exc.size))
            return ReadOutcome(path_str, path, error=rules.too_large(path, exc.size, rules.max_bytes))
        if exc.kind == "encoding":
            return ReadOutcome(path_str, path, error="not a UTF-8 text file")
        return ReadOutcome(path_str, path, error=exc.reason)
