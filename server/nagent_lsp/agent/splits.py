"""Split and patch: segmenting (text/) and the index files (store/) glued together for the editor.

`split_text` cuts what the user sees into a fresh split folder; `plan_patch` validates an index against the
current text and merges its segments; after the merged text is applied, `refresh_after_apply` makes the index
describe it. The source file itself is never written here: the merged text goes back to the editor as edits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagent_lsp.core.errors import PatchError, SplitError
from nagent_lsp.core.identity import sha256_hex
from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.splits import (
    SplitResult,
    load_index,
    new_split_dir,
    remove_stale_segments,
    write_index,
    write_split,
)
from nagent_lsp.text.segments import TARGET_BYTES_DEFAULT, build_index, count_lines
from nagent_lsp.text.split_rules import detect_split_type, normalize_split_type


@dataclass
class PatchPlan:
    index_path: Path
    index: dict[str, Any]
    source_path: Path
    original: str  # the current text the patch applies to
    merged: str
    segments: list[tuple[dict[str, Any], str]]  # (index entry, segment text as merged), sorted by line
    repaired: list[int]  # positions of segments given a missing final newline

    @property
    def changed(self) -> bool:
        return self.original != self.merged


def _segment_path(index_path: Path, entry: dict[str, Any]) -> Path:
    p = Path(entry["path"])
    return p if p.is_absolute() else index_path.parent / p


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else ("\r" if "\r" in text and "\n" not in text else "\n")


def plan_patch(index_path: Path, current_text: str, *, force: bool = False) -> PatchPlan:
    """Validate the index against `current_text` and merge its segments; raises PatchError."""
    try:
        index = load_index(index_path)
    except SplitError as exc:
        raise PatchError(str(exc)) from None
    source = Path(index["source_path"])
    expected = index.get("source_sha256")
    if not force and expected:
        actual = sha256_hex(current_text.encode("utf-8"))
        if actual != expected:
            raise PatchError(
                f"source hash does not match index.json (expected {expected}, got {actual}): "
                f"{source.name} changed since it was split; split it again, or patch with force"
            )
    entries = sorted(index["segments"], key=lambda s: (s["start_line_num"], s["end_line_num"]))
    expected_start = 1
    previous = None
    for position, entry in enumerate(entries, 1):
        start, end = entry["start_line_num"], entry["end_line_num"]
        label = f"segment {entry.get('segment_index', position)}"
        if end < start - 1:
            raise PatchError(f"{label} ends (line {end}) before it starts (line {start}) in index.json")
        if start > expected_start:
            where = f"after {previous}" if previous else "before the first segment"
            raise PatchError(
                f"segments are not contiguous in index.json: gap at lines {expected_start}-{start - 1} "
                f"({where}; {label} starts at line {start})"
            )
        if start < expected_start:
            raise PatchError(
                f"segments overlap in index.json: {label} starts at line {start} but "
                f"{previous} already covers up to line {expected_start - 1}"
            )
        expected_start = end + 1
        previous = label
    line_count = index.get("source_line_count")
    if isinstance(line_count, int) and expected_start - 1 != line_count:
        raise PatchError(
            f"segments in index.json cover lines 1-{expected_start - 1} but the source had {line_count} lines"
        )
    texts = []
    for entry in entries:
        path = _segment_path(index_path, entry)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise PatchError(f"segment not found: {path}") from None
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise PatchError(f"segment is not valid UTF-8: {path} ({exc.reason} at byte {exc.start})") from None
    # A segment is a run of whole lines: if an edit dropped a non-final segment's last line break, its last
    # line would silently join the next segment's first line, so restore the break.
    newline = _newline(current_text)
    repaired = []
    for i in range(len(texts) - 1):
        if texts[i] and not texts[i].endswith(("\n", "\r")):
            texts[i] += newline
            repaired.append(i)
    return PatchPlan(
        index_path=index_path,
        index=index,
        source_path=source,
        original=current_text,
        merged="".join(texts),
        segments=list(zip(entries, texts, strict=False)),
        repaired=repaired,
    )


def reindex(plan: PatchPlan) -> dict[str, Any]:
    """After the merged text was applied: renumber the segments over their (possibly edited) files.

    Segment files stay where they are (a model may still refer to them); the index now describes the merged
    text. Extra per-segment keys survive; the whole-file summary is dropped because it described old text.
    """
    data = plan.merged.encode("utf-8")
    index = {k: v for k, v in plan.index.items() if k != "summary"}
    line = 1
    segments = []
    for position, (entry, text) in enumerate(plan.segments, 1):
        n = count_lines(text.encode("utf-8"))
        if position - 1 in plan.repaired:
            atomic_write_bytes(_segment_path(plan.index_path, entry), text.encode("utf-8"))
        segments.append({**entry, "segment_index": position, "start_line_num": line, "end_line_num": line + n - 1})
        line += n
    index.update(
        source_sha256=sha256_hex(data),
        source_size_bytes=len(data),
        source_line_count=count_lines(data),
        segment_count=len(segments),
        segments=segments,
    )
    write_index(plan.index_path, index)
    remove_stale_segments(plan.index_path, index)
    return index


def refresh_after_apply(plan: PatchPlan, final_text: str) -> dict[str, Any]:
    """Bring the index in line with what the editor now holds."""
    if final_text == plan.merged:
        return reindex(plan)
    # A three-way merge kept the user's concurrent edits: the segments no longer describe the text, re-split.
    return refresh_split(plan.index_path, final_text)


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
    out_dir = new_split_dir(splits_dir, source)
    data = text.encode("utf-8")
    index, blobs = build_index(data, source, out_dir, kind, target_bytes, natural)
    index_path = out_dir / "index.json"
    write_split(index_path, index, blobs)
    return SplitResult(index_path, index)


def refresh_split(index_path: Path, text: str) -> dict[str, Any]:
    """Re-split `text` into the same directory with the index's settings; delete segments no longer used."""
    old = load_index(index_path)
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
    write_split(index_path, index, blobs)
    remove_stale_segments(index_path, index, old)
    return index
