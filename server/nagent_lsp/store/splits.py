"""Split indexes on disk: the one reader and writer of `index.json` and its segment files.

The text comes from the caller (the editor's buffer when open), never re-read here, so the index hash
describes exactly what was split.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagent_lsp.core.errors import SplitError
from nagent_lsp.core.identity import file_id_for, short_slug
from nagent_lsp.store.atomic import atomic_write_bytes, atomic_write_text

INDEX = "index.json"


@dataclass(frozen=True)
class SplitResult:
    index_path: Path
    index: dict[str, Any]


def write_index(index_path: Path, index: dict[str, Any]) -> None:
    atomic_write_text(index_path, json.dumps(index, indent=2, ensure_ascii=False) + "\n")


def write_split(index_path: Path, index: dict[str, Any], blobs: list[bytes]) -> None:
    for entry, blob in zip(index["segments"], blobs, strict=False):
        atomic_write_bytes(Path(entry["path"]), blob)
    write_index(index_path, index)


def load_index(index_path: Path) -> dict[str, Any]:
    if not index_path.is_file():
        raise SplitError(f"index not found: {index_path}")
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SplitError(f"index is not valid JSON: {index_path}: {exc}") from None
    if not isinstance(index, dict):
        raise SplitError(f"index is not a JSON object: {index_path}")
    if not index.get("source_path"):
        raise SplitError(f"index.json missing source_path: {index_path}")
    segments = index.get("segments")
    if not isinstance(segments, list) or not segments:
        raise SplitError(f"index.json has no segments: {index_path}")
    for position, entry in enumerate(segments, 1):
        if (
            not isinstance(entry, dict)
            or not all(isinstance(entry.get(k), int) for k in ("start_line_num", "end_line_num"))
            or not isinstance(entry.get("path"), str)
        ):
            raise SplitError(f"index.json segment {position} needs start_line_num, end_line_num and path")
    return index


def _segment_pattern(source: Path) -> re.Pattern[str]:
    return re.compile(re.escape(source.stem) + r"-\d{4,}" + re.escape(source.suffix) + r"\Z")


def remove_stale_segments(index_path: Path, index: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    """Delete segment files in the index folder (or listed by the old index) that the index no longer uses."""
    keep = {Path(s["path"]).resolve() for s in index["segments"]}
    pattern = _segment_pattern(Path(index["source_path"]))
    stale = {p.resolve() for p in index_path.parent.iterdir() if p.is_file() and pattern.match(p.name)}
    if old:
        # Only files inside the index folder: a hand-edited index must not make us delete elsewhere.
        for s in old.get("segments", []):
            p = Path(s.get("path", "")).resolve()
            if p.parent == index_path.parent.resolve():
                stale.add(p)
    for p in stale - keep:
        p.unlink(missing_ok=True)


def new_split_dir(splits_dir: Path, source: Path) -> Path:
    """A fresh `splits_dir/<slug(stem)>-<uuid4>/` for one split of `source`."""
    out_dir = splits_dir / f"{short_slug(source.stem)}-{uuid.uuid4()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def find_split_dirs(splits_root: Path, target: Path, target_file_id: str | None = None) -> list[Path]:
    """The split folders (`splits/*/index.json`) whose source is the target: by file id when known (the
    target may have been renamed since it was split), else by path."""
    target = Path(target).resolve()
    found: list[Path] = []
    if not Path(splits_root).is_dir():
        return found
    for index in sorted(Path(splits_root).glob(f"*/{INDEX}")):
        try:
            source = json.loads(index.read_text(encoding="utf-8")).get("source_path")
        except (OSError, ValueError, AttributeError):
            continue  # a damaged or foreign index is not ours to trust
        if not isinstance(source, str):
            continue
        # The source must still exist: a split of a file that is gone (or was replaced) is stale.
        try:
            source_id = file_id_for(source)
        except OSError:
            continue
        if source_id == target_file_id if target_file_id else Path(source).resolve() == target:
            found.append(index.parent)
    return found
