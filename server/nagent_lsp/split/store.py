"""Segment files and index.json on disk (nagent's index fields), refresh in place.

The text comes from the caller (the editor's buffer when open), never re-read here, so the index hash
describes exactly what was split.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nagent_lsp.conversations.identity import slug as identity_slug
from nagent_lsp.atomic import atomic_write_bytes, atomic_write_text
from nagent_lsp.split.rules import detect_split_type, normalize_split_type
from nagent_lsp.split.segmenter import TARGET_BYTES_DEFAULT, count_lines, plan_segments


class SplitError(ValueError):
    """A split/index problem the user can act on; the message says what."""


@dataclass(frozen=True)
class SplitResult:
    index_path: Path
    index: dict[str, Any]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def slug(name: str) -> str:
    return identity_slug(name)[:48].strip("-") or "file"  # folder names stay short


def segment_name(source: Path, index: int) -> str:
    return f"{source.stem}-{index:04d}{source.suffix}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def build_index(
    data: bytes,
    source: Path,
    out_dir: Path,
    split_type: str,
    target_bytes: int,
    natural: bool,
    created_at: str | None = None,
) -> tuple[dict[str, Any], list[bytes]]:
    """The index dict and the bytes of each segment (nothing written)."""
    segments = plan_segments(data, split_type, target_bytes, natural)
    index = {
        "source_path": str(source),
        "source_sha256": sha256_bytes(data),
        "source_size_bytes": len(data),
        "source_line_count": count_lines(data),
        "split_type": split_type,
        "target_bytes": target_bytes,
        "natural": natural,
        "created_at": created_at or _now(),
        "segment_count": len(segments),
        "segments": [
            {
                "segment_index": s.index,
                "start_line_num": s.start_line,
                "end_line_num": s.end_line,
                "path": str(out_dir / segment_name(source, s.index)),
            }
            for s in segments
        ],
    }
    return index, [data[s.start_byte : s.end_byte] for s in segments]


def write_index(index_path: Path, index: dict[str, Any]) -> None:
    atomic_write_text(index_path, json.dumps(index, indent=2, ensure_ascii=False) + "\n")


def _write(index_path: Path, index: dict[str, Any], blobs: list[bytes]) -> None:
    for entry, blob in zip(index["segments"], blobs):
        atomic_write_bytes(Path(entry["path"]), blob)
    write_index(index_path, index)


def split_text(
    text: str,
    source: Path,
    splits_dir: Path,
    *,
    split_type: str | None = None,
    target_bytes: int = TARGET_BYTES_DEFAULT,
    natural: bool = False,
) -> SplitResult:
    """Split `text` (the content of `source`) into a fresh `splits_dir/<slug(stem)>-<uuid4>/`."""
    if target_bytes <= 0:
        raise SplitError("target bytes must be a positive number")
    kind = normalize_split_type(split_type) if split_type else detect_split_type(source)
    out_dir = splits_dir / f"{slug(source.stem)}-{uuid.uuid4()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    index, blobs = build_index(data, source, out_dir, kind, target_bytes, natural)
    index_path = out_dir / "index.json"
    _write(index_path, index, blobs)
    return SplitResult(index_path, index)


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
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), int) for k in ("start_line_num", "end_line_num")
        ) or not isinstance(entry.get("path"), str):
            raise SplitError(f"index.json segment {position} needs start_line_num, end_line_num and path")
    return index


def _segment_pattern(source: Path) -> re.Pattern[str]:
    return re.compile(re.escape(source.stem) + r"-\d{4,}" + re.escape(source.suffix) + r"\Z")


def refresh_split(index_path: Path, text: str) -> dict[str, Any]:
    """Re-split `text` into the same directory with the index's settings; delete segments no longer used."""
    if not index_path.is_file():
        raise SplitError(f"index not found: {index_path}")
    old = json.loads(index_path.read_text(encoding="utf-8"))
    source = Path(old["source_path"])
    out_dir = index_path.parent
    kind = normalize_split_type(old.get("split_type") or detect_split_type(source))
    index, blobs = build_index(
        text.encode("utf-8"),
        source,
        out_dir,
        kind,
        int(old.get("target_bytes") or TARGET_BYTES_DEFAULT),
        bool(old.get("natural", False)),
    )
    _write(index_path, index, blobs)
    remove_stale_segments(index_path, index, old)
    return index


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
