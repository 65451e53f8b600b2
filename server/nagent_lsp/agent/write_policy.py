"""`<nagent-write>` policy for an editor session (DESIGN §5.4): the target or its split segments, nothing else.

Nothing is written here: the caller stages a write to the target (its text) or to a segment (in the run's
StagedSplits), and neither reaches disk during the run.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nagent_lsp.agent.sandbox import Refused, resolve_in
from nagent_lsp.core.identity import file_id_for
from nagent_lsp.store.splits import INDEX


@dataclass(frozen=True)
class WriteTarget:
    kind: Literal["target", "segment"]
    path: Path  # resolved


def check_write(
    path_str: str,
    target: Path,
    allowed_segment_dir: Path | Iterable[Path] | None = None,
    *,
    target_file_id: str | None = None,
    base: Path | None = None,
    segments: Collection[Path] = (),
) -> WriteTarget:
    """Where a write may go, or `Refused`.

    Allowed: the target by path; the file whose id is the session's file id (the target was renamed while
    the model worked); one of `segments` (resolved paths of the target's trusted splits, as the run knows
    them); an existing file inside one of `allowed_segment_dir` (not its index.json).
    Relative paths are taken from `base` (default: the target's folder). New files are never allowed."""
    target = Path(target).resolve()
    refusal = f"write not allowed: only {target} or its split segments may be edited in this session"
    if not path_str or "\0" in path_str:
        raise Refused(refusal)
    try:
        resolved = resolve_in(path_str, Path(base) if base is not None else target.parent)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise Refused(f"write not allowed: {exc}") from exc
    if resolved == target:
        return WriteTarget("target", resolved)
    if resolved in segments:
        return WriteTarget("segment", resolved)
    if target_file_id and resolved.is_file():
        try:
            if file_id_for(resolved) == target_file_id:
                return WriteTarget("target", resolved)
        except OSError:
            pass
    if allowed_segment_dir is None:
        dirs: list[Path] = []
    elif isinstance(allowed_segment_dir, (str, os.PathLike)):
        dirs = [Path(allowed_segment_dir)]
    else:
        dirs = [Path(d) for d in allowed_segment_dir]
    for directory in dirs:
        directory = directory.resolve()
        if directory in resolved.parents and resolved.name != INDEX and resolved.is_file():
            return WriteTarget("segment", resolved)
    raise Refused(refusal)
