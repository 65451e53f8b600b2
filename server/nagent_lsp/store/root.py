"""Creating a state root: the folder and, the first time only, its `.gitignore` (caches and splits are not
the user's data; conversations are, and may be committed)."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.store.atomic import atomic_write_text

GITIGNORE = "cache/\nsplits/\n"


def ensure_root(path: Path) -> Path:
    """Create the root on first use; a fresh root gets its .gitignore, an existing one is left alone."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path / ".gitignore", GITIGNORE)
    return path
