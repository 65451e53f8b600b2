"""State root resolution (DESIGN §2): `<repo>/.nagent`, else the workspace folder's, else `~/.nagent`.

Resolution only; creating a root is `store.root`'s job."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

STATE_DIR = ".nagent"
SECRET_FILE = "secret"


def home_root() -> Path:
    # HOME at call time, not at import: a server's HOME is fixed, each test has its own.
    return Path(os.path.expanduser("~")) / STATE_DIR


def user_config_path() -> Path:
    """The user's own config file: the one source a repository cannot plant (DESIGN §12)."""
    return home_root() / "config.json"


def secret_path() -> Path:
    """The per-user secret that proves proposals are the user's (store/provenance.py makes it)."""
    return home_root() / SECRET_FILE


def git_toplevel(directory: str) -> str | None:
    """The git work tree containing `directory`, found by walking up to a `.git` entry (no process).

    Not cached: a few stat calls cost microseconds, and a folder can become a repository (`git init`) while
    the server runs."""
    path = Path(directory)
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return None


def repo_relative(root: Path, path: Path) -> str | None:
    """`path` (symlinks resolved) relative to the repository `root` (resolved too), "/" separated; None outside it
    or inside its `.git`."""
    try:
        rel = Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return None
    if not rel.parts or rel.parts[0] == ".git":
        return None
    return rel.as_posix()


class StateRoot(NamedTuple):
    path: Path
    kind: str  # "setting" | "repository" | "workspace" | "home"


def resolve_state_root(
    target: Path | None,
    workspace_folders: list[Path] | tuple[Path, ...] = (),
    override: str | None = None,
) -> StateRoot:
    if override:
        return StateRoot(Path(os.path.expanduser(override)).resolve(), "setting")
    if target is not None:
        start = target if target.is_dir() else target.parent
        top = git_toplevel(str(start))
        if top:
            return StateRoot(Path(top) / STATE_DIR, "repository")
        for folder in sorted(workspace_folders, key=lambda p: len(str(p)), reverse=True):
            try:
                target.relative_to(folder)
            except ValueError:
                continue
            return StateRoot(folder / STATE_DIR, "workspace")
    elif workspace_folders:
        top = git_toplevel(str(workspace_folders[0]))
        base = Path(top) if top else workspace_folders[0]
        return StateRoot(base / STATE_DIR, "repository" if top else "workspace")
    return StateRoot(home_root(), "home")
