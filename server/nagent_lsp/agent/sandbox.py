"""Read confinement (DESIGN §5.4, §12): the one rule for every path that reads a file, for any reason.

The edit target, split, patch sources, summarize, code actions, conversation commands and the model's own
reads all go through `ReadRules`: a file may be read only when it lies inside a workspace folder (symlinks and
`..` resolved first, so neither can reach outside), matches no `denyRead` glob (case-insensitively, on what was
asked for and on what it resolves to), is not under /proc, /sys or /dev, is a regular file (no FIFO, device,
socket or directory: those could block or never end) and holds at most `maxFileBytes`. The bytes come from the
one bounded reader, `store.files.read_regular_bytes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nagent_lsp.agent.confine import Refused, confine_read, os_reason
from nagent_lsp.config.defaults import DEFAULT_DENY_READ, DEFAULT_MAX_FILE_BYTES
from nagent_lsp.store.files import FileTooLarge, NotRegularFile, read_regular_bytes


@dataclass(frozen=True)
class ReadRules:
    """The session's read rules: workspace folders, denyRead globs, maxFileBytes."""

    folders: tuple[Path, ...]
    deny: tuple[str, ...] = DEFAULT_DENY_READ
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    # An agent's `read` permission (agent.permissions): only ever narrows; (resolved path) -> refusal or None.
    narrow: Callable[[Path], str | None] | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        folders: Iterable[Path],
        deny: Iterable[str] = DEFAULT_DENY_READ,
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        narrow: Callable[[Path], str | None] | None = None,
    ) -> ReadRules:
        return cls(tuple(Path(f).resolve() for f in folders), tuple(deny), max_bytes, narrow)

    def confine(self, path: str | Path, base: Path | None = None) -> Path:
        """Where a read of `path` may go (resolved), or `Refused`: the location and name rules only."""
        resolved = confine_read(path, self.folders, self.deny, base)
        refusal = self.narrow(resolved) if self.narrow is not None else None
        if refusal:
            raise Refused(refusal, "denied")
        return resolved

    def allows(self, path: str | Path) -> bool:
        try:
            self.confine(path)
        except Refused:
            return False
        return True

    def read_bytes(self, path: Path, limit: int | None = None) -> bytes:
        """The bytes of a confined path (from `confine`) through the bounded reader, or `Refused`."""
        cap = self.max_bytes if limit is None else min(limit, self.max_bytes)
        try:
            return read_regular_bytes(path, cap)
        except FileNotFoundError:
            raise Refused("file not found", "missing") from None
        except NotRegularFile as exc:
            if exc.kind == "a directory":
                raise Refused("is a directory, not a file", "special") from None
            raise Refused(f"{path} is {exc.kind}, not a regular file; only regular files are read", "special") from None
        except FileTooLarge as exc:
            raise Refused(self.too_large(path, exc.size, cap), "size", exc.size) from None
        except OSError as exc:
            raise Refused(f"{path} cannot be read ({os_reason(exc)})", "io") from None

    def read_text(self, path: Path, limit: int | None = None) -> str:
        raw = self.read_bytes(path, limit)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})", "encoding") from None

    def check_text(self, path: Path, text: str) -> None:
        """An open buffer's text obeys the size rule too (its bytes are what would be split or sent)."""
        if len(text) * 4 <= self.max_bytes:
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:
            raise Refused(self.too_large(path, size, self.max_bytes), "size", size)

    def too_large(self, path: Path, size: int, cap: int) -> str:
        if cap < self.max_bytes:
            return f"{path} is {size} bytes, more than {cap}"
        return (
            f"{path} is {size} bytes, more than maxFileBytes ({self.max_bytes}); "
            "raise the maxFileBytes setting to work on it"
        )
