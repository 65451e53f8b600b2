"""Read confinement for an editor session (DESIGN §5.4): only workspace files, never secrets.

Symlinks are resolved before the check, so neither `..` nor a link can reach outside the workspace folders,
and `denyRead` globs are matched against what was asked for and what it resolves to.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from nagent_lsp.config.settings import DEFAULT_DENY_READ


class Refused(Exception):
    """An action the session does not allow; `reason` goes into the action's error result."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    folder hides what is inside it)."""
    candidates = [relative.name, relative.as_posix(), *relative.parts[:-1]]
    for glob in globs:
        if any(fnmatchcase(c, glob) for c in candidates):
            return glob
    return None


def confine_read(
    path_str: str,
    workspace_folders: Iterable[Path],
    deny_globs: Iterable[str] = DEFAULT_DENY_READ,
    base: Path | None = None,
) -> Path:
    """The resolved path a read may use, or `Refused` saying why.

    Relative paths are taken from `base` (default: the first workspace folder, where shell commands run)."""
    if not path_str or "\0" in path_str:
        raise Refused("empty or invalid path")
    folders = [Path(f).resolve() for f in workspace_folders]
    if not folders:
        raise Refused("no workspace folder is open; reads are limited to workspace folders")
    globs = list(deny_globs)
    start = Path(base).resolve() if base is not None else folders[0]
    requested = Path(os.path.expanduser(path_str))
    lexical = requested if requested.is_absolute() else start / requested
    resolved = resolve_in(path_str, start)
    folder = containing_folder(resolved, folders)
    if folder is None:
        raise Refused(f"{path_str} is outside the workspace folders")
    glob = denied_by(PurePosixPath(resolved.relative_to(folder).as_posix()), globs)
    if glob is None:
        # A link named like a secret is refused too, whatever it points at.
        lexical_folder = containing_folder(Path(os.path.normpath(lexical)), folders)
        rel = Path(os.path.normpath(lexical)).relative_to(lexical_folder) if lexical_folder else Path(lexical.name)
        glob = denied_by(PurePosixPath(rel.as_posix()), globs)
    if glob is not None:
        raise Refused(f"{path_str} matches the denyRead pattern {glob!r}")
    return resolved
