"""`<state root>/patches/`: a unified diff for every change applied to a file."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from nagent_lsp.core.identity import short_slug
from nagent_lsp.store.atomic import atomic_write_text


def patch_file_name(source: Path) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{short_slug(source.stem)}-{stamp}-{uuid.uuid4().hex[:8]}.patch"


def write_patch(patches_dir: Path, source: Path, diff: str) -> Path | None:
    """Write `diff` (a unified diff of `source`) under `patches_dir`; None when the diff is empty."""
    if not diff:
        return None
    path = patches_dir / patch_file_name(source)
    atomic_write_text(path, diff)
    return path
