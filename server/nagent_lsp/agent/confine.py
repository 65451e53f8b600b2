"""Where a read may go: the location and name rules of read confinement (DESIGN §5.4, §12), in a module of their
own so the CLI's cold `history` applies the very same rules without the reading machinery (agent/sandbox.py,
which re-exports these names and adds the bounded reader and an agent's narrowing)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Literal

from nagent_lsp.config.defaults import DEFAULT_DENY_READ
from nagent_lsp.config.state_root import secret_path

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
        raise Refused(f"{_printable_path(path_str)} cannot be resolved ({os_reason(exc)})") from None
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


def os_reason(exc: BaseException) -> str:
    """Why a path could not be used, in words (an errno's text, a symlink loop)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    if isinstance(exc, RuntimeError):
        return "symlink loop"
    return "invalid path"
