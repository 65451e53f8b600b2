"""Read confinement (DESIGN §5.4, §12): the one rule for every path that reads a file, for any reason.

The edit target, split, patch sources, summarize, code actions, conversation commands and the model's own
reads all go through `ReadRules`: a file may be read only when it lies inside a workspace folder (symlinks and
`..` resolved first, so neither can reach outside), matches no `denyRead` glob (case-insensitively, on what was
asked for and on what it resolves to), is not under /proc, /sys or /dev, is a regular file (no FIFO, device,
socket or directory: those could block or never end) and holds at most `maxFileBytes`. The bytes come from the
one bounded reader, `store.files.read_regular_bytes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Literal

from nagent_lsp.config.settings import DEFAULT_DENY_READ, DEFAULT_MAX_FILE_BYTES
from nagent_lsp.store.files import FileTooLarge, NotRegularFile, read_regular_bytes
from nagent_lsp.store.provenance import secret_path

# Kernel views, not files: /proc/self/environ holds the server's environment (the API key), /dev/zero never ends.
SPECIAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))

RefusalKind = Literal["location", "denied", "special", "size", "missing", "encoding", "io"]


class Refused(Exception):
    """An action the session does not allow; `reason` goes into the action's error result.

    `kind` says why: `location` (outside the workspace folders, or no folder open), `denied` (a denyRead glob),
    `special` (not a regular file), `size` (over maxFileBytes) — refusals of the path itself — or `missing`,
    `encoding`, `io` — the file could not be read as text."""

    def __init__(self, reason: str, kind: RefusalKind = "location", size: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.size = size  # the file's size, for a `size` refusal


def resolve_in(path_str: str, base: Path) -> Path:
    """`~` expanded, relative to `base`, symlinks and `..` resolved."""
    candidate = Path(os.path.expanduser(path_str))
    if not candidate.is_absolute():
        candidate = base / candidate
    return candidate.resolve()


def containing_folder(path: Path, folders: Iterable[Path]) -> Path | None:
    """The innermost workspace folder holding `path` (both already resolved)."""
    best: Path | None = None
    for folder in folders:
        if path == folder or folder in path.parents:
            if best is None or len(folder.parts) > len(best.parts):
                best = folder
    return best


def denied_by(relative: PurePosixPath, globs: Iterable[str]) -> str | None:
    """The first glob matching the basename, the relative path, or any folder on the way (a `.env.d/`
    folder hides what is inside it). Case-insensitive: `.ENV` and `.Env.Production` are secrets too, and on a
    case-insensitive file system they are the same file as `.env`."""
    candidates = [c.casefold() for c in (relative.name, relative.as_posix(), *relative.parts[:-1])]
    for glob in globs:
        pattern = glob.casefold()
        if any(fnmatchcase(c, pattern) for c in candidates):
            return glob
    return None


def denied_at_any_depth(relative: PurePosixPath, globs: Iterable[str]) -> str | None:
    """`denied_by` on every tail of the path too, so a glob holds at any depth: `.git/**` is a nested repository's
    `.git` as well (its hooks run code), `.git` a `.git` file in any folder. How denyWrite and reviewAlways match."""
    globs = tuple(globs)
    for tail in (PurePosixPath(*relative.parts[i:]) for i in range(len(relative.parts))):
        glob = denied_by(tail, globs)
        if glob is not None:
            return glob
    return None


def _special(path: Path) -> bool:
    return any(path == root or root in path.parents for root in SPECIAL_ROOTS)


def confine_read(
    path_str: str | Path,
    workspace_folders: Iterable[Path],
    deny_globs: Iterable[str] = DEFAULT_DENY_READ,
    base: Path | None = None,
) -> Path:
    """The resolved path a read may use, or `Refused` saying why.

    Relative paths are taken from `base` (default: the first workspace folder, where shell commands run)."""
    path_str = os.fspath(path_str)
    if not path_str or "\0" in path_str:
        raise Refused("empty or invalid path")
    folders = [Path(f).resolve() for f in workspace_folders]
    if not folders:
        raise Refused("no workspace folder is open; reads are limited to workspace folders")
    globs = list(deny_globs)
    start = Path(base).resolve() if base is not None else folders[0]
    try:
        requested = Path(os.path.expanduser(path_str))
        lexical = requested if requested.is_absolute() else start / requested
        resolved = resolve_in(path_str, start)
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long for the system
        raise Refused(f"{_printable_path(path_str)} cannot be resolved ({_reason(exc)})") from None
    folder = containing_folder(resolved, folders)
    if folder is None:
        shown = ", ".join(str(f) for f in folders)
        where = f"outside the workspace folders ({shown}); only files inside them are read"
        raise Refused(f"{_printable_path(path_str)} is {where}")
    if _special(resolved):
        kind = "a kernel or device file (/proc, /sys, /dev)"
        raise Refused(f"{_printable_path(path_str)} is {kind}, never read", "special")
    if _private(resolved):
        raise Refused(f"{_printable_path(path_str)} is nagent's per-user secret, never read", "denied")
    glob = denied_by(PurePosixPath(resolved.relative_to(folder).as_posix()), globs)
    if glob is None:
        # A link named like a secret is refused too, whatever it points at.
        lexical_folder = containing_folder(Path(os.path.normpath(lexical)), folders)
        rel = Path(os.path.normpath(lexical)).relative_to(lexical_folder) if lexical_folder else Path(lexical.name)
        glob = denied_by(PurePosixPath(rel.as_posix()), globs)
    if glob is not None:
        raise Refused(f"{_printable_path(path_str)} matches the denyRead pattern {glob!r}", "denied")
    return resolved


def _private(path: Path) -> bool:
    """The per-user secret that proves proposals are the user's (store/provenance.py): never read for anything, even
    when a workspace folder holds the home folder (denyRead globs are the user's to change; this is not)."""
    try:
        return path == secret_path().resolve()
    except (OSError, RuntimeError):
        return False


def _printable_path(path_str: str) -> str:
    """A path as it may appear in a message: bounded, without control characters."""
    clean = "".join(c if c.isprintable() else "?" for c in path_str)
    return clean if len(clean) <= 300 else clean[:150] + "…" + clean[-100:]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    if isinstance(exc, RuntimeError):
        return "symlink loop"
    return "invalid path"


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
            raise Refused(f"{path} cannot be read ({_reason(exc)})", "io") from None

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
