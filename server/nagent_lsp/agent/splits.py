"""Split and patch: segmenting (text/) and the index files (store/) glued together for the editor.

`split_text` cuts what the user sees into a fresh split folder; `load_trusted_split` is the one way an index
is accepted for use (DESIGN §12); `plan_patch` validates a trusted index against the current text and merges
its segments; after the merged text is applied, `refresh_after_apply` makes the index describe it. The source
file itself is never written here: the merged text goes back to the editor as edits.

`StagedSplits` is an edit run's view of split folders: the model's segment writes, and the re-splits that
follow its merges, are held in memory and seen by that run alone. Nothing a run does to a segment reaches
disk; once the run's change is applied, the split folders it used are re-split from the applied text.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.config.settings import DEFAULT_MAX_FILE_BYTES
from nagent_lsp.core.errors import PatchError, SplitError
from nagent_lsp.core.identity import sha256_hex
from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.split_index import (
    INDEX,
    STAMP,
    SegmentsTooLarge,
    SplitResult,
    UntrustedIndex,
    find_split_dirs,
    load_index,
    new_split_dir,
    read_segment,
    remove_stale_segments,
    segment_path,
    split_dir_name,
    verify_index,
    write_index,
    write_split,
)
from nagent_lsp.text.segments import TARGET_BYTES_DEFAULT, build_index, count_lines


@dataclass
class TrustedSplit:
    """An index accepted by `load_trusted_split` (or made by this run): where it is, what it says, its source."""

    index_path: Path  # resolved
    index: dict[str, Any]
    source: Path  # resolved, inside the workspace

    @property
    def folder(self) -> Path:
        return self.index_path.parent

    @cached_property
    def paths(self) -> tuple[Path, ...]:
        return tuple(segment_path(self.folder, entry) for entry in self.index["segments"])

    def segment_paths(self) -> list[Path]:
        return list(self.paths)


def load_trusted_split(
    index_path: Path | str,
    rules: ReadRules,
    splits_roots: Iterable[Path],
    root_of: Callable[[Path], Path] | None = None,
) -> TrustedSplit:
    """The one trusted-index loader: the index at `index_path`, or UntrustedIndex / SplitError saying why not.

    Trusted only (DESIGN §12) when its folder sits directly in one of `splits_roots` (the `splits/` of the
    session's state roots) — or, with `root_of` (path → its state root), in the `splits/` of the state root its
    own source belongs to, inside the workspace — when the server wrote it (store.split_index.load_index: its
    ownership stamp and folder identity), when every segment lies in its folder, and when its source passes the
    read rules (inside the workspace, no denyRead match). Its location is checked before a byte of it is read."""
    raw = os.fspath(index_path)
    if not raw or "\0" in raw:
        raise UntrustedIndex("the index path is empty or invalid")
    try:
        path = Path(os.path.expanduser(raw)).resolve()
    except (OSError, RuntimeError) as exc:
        raise UntrustedIndex(f"{raw} cannot be resolved ({exc})") from None
    if not path.exists():
        raise SplitError(f"index not found: {raw}")
    roots = [Path(r).resolve() for r in splits_roots]
    where = ", ".join(str(r) for r in roots) or "no state root"
    outside = UntrustedIndex(
        f"{raw} is not a split made by nagent-lsp: indexes are trusted only in the state root's splits folder "
        f"({where}); run nagent.split to make one"
    )
    if path.name != INDEX or path.is_dir():
        raise outside
    splits_dir = path.parent.parent
    known = splits_dir in roots
    if not known and (root_of is None or splits_dir.name != "splits" or not rules.allows(path)):
        raise outside
    index = load_index(path, verify=False)
    try:
        source = rules.confine(index["source_path"])
    except Refused as exc:
        raise UntrustedIndex(f"{raw} names a source that may not be read: {exc.reason}") from None
    if not known and root_of is not None and root_of(source).resolve() / "splits" != splits_dir:
        raise outside
    verify_index(path, index)  # last: a refusal above names the more specific reason
    return TrustedSplit(path, index, source)


def trusted_splits_of(
    splits_root: Path, target: Path, rules: ReadRules, file_id: str | None = None
) -> list[TrustedSplit]:
    """The trusted splits in `splits_root` whose source is `target` (by file id when given)."""
    found = []
    for folder in find_split_dirs(splits_root, target, file_id):
        try:
            found.append(load_trusted_split(folder / INDEX, rules, [splits_root]))
        except SplitError:
            continue
    return found


@dataclass
class PatchPlan:
    index_path: Path
    index: dict[str, Any]
    source_path: Path
    original: str  # the current text the patch applies to
    merged: str
    segments: list[tuple[dict[str, Any], str]]  # (index entry, segment text as merged), sorted by line
    repaired: list[int]  # positions of segments given a missing final newline
    folder: Path = field(default_factory=Path)  # resolved split folder

    @property
    def changed(self) -> bool:
        return self.original != self.merged


def too_large_to_merge(max_bytes: int) -> str:
    return (
        f"the merged segments hold more than maxFileBytes ({max_bytes} bytes); "
        "raise the maxFileBytes setting to patch a file this large"
    )


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else ("\r" if "\r" in text and "\n" not in text else "\n")


def checked_entries(index: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The index's segments sorted by line, or PatchError naming the first gap, overlap or miscount."""
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
    if type(line_count) is int and expected_start - 1 != line_count:
        raise PatchError(
            f"segments in index.json cover lines 1-{expected_start - 1} but the source had {line_count} lines"
        )
    return entries


def plan_patch(  # noqa: C901, PLR0912, PLR0915  2026-11-27: each index check raises its own named PatchError, in order
    split: TrustedSplit | Path,
    current_text: str,
    *,
    force: bool = False,
    staged: Mapping[Path, str] | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> PatchPlan:
    """Validate the index against `current_text` and merge its segments; raises PatchError.

    `split` is a trusted split (what the server's commands and the model's tags pass); a bare index path is
    loaded with the store's own checks only (ownership, segments inside the folder), for tests and benchmarks.
    `staged` holds segment texts of an edit run (resolved path → text) that win over the files on disk.
    The merged text may hold at most `max_bytes`."""
    if isinstance(split, TrustedSplit):
        index_path, index = split.index_path, split.index
        source = split.source
    else:
        index_path = Path(split)
        try:
            index = load_index(index_path)
        except SplitError as exc:
            raise PatchError(str(exc)) from None
        source = Path(index["source_path"])
    folder = index_path.parent.resolve()
    expected = index.get("source_sha256")
    if not force and expected:
        actual = sha256_hex(current_text.encode("utf-8", "surrogatepass"))
        if actual != expected:
            raise PatchError(
                f"source hash does not match index.json (expected {expected}, got {actual}): "
                f"{source.name} changed since it was split; split it again, or patch with force"
            )
    entries = checked_entries(index)
    texts = []
    total = 0
    for entry in entries:
        try:
            path = segment_path(folder, entry)
        except UntrustedIndex as exc:
            raise PatchError(str(exc)) from None
        text = staged.get(path) if staged else None
        if text is None:
            try:
                raw = read_segment(path, max(0, max_bytes - total))
            except SegmentsTooLarge:
                raise PatchError(too_large_to_merge(max_bytes)) from None
            except SplitError as exc:
                raise PatchError(str(exc)) from None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PatchError(f"segment is not valid UTF-8: {path} ({exc.reason} at byte {exc.start})") from None
            total += len(raw)
        else:
            total += len(text.encode("utf-8", "surrogatepass"))
        if total > max_bytes:
            raise PatchError(too_large_to_merge(max_bytes))
        texts.append(text)
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
        folder=folder,
    )


def reindex(plan: PatchPlan) -> dict[str, Any]:
    """After the merged text was applied: renumber the segments over their (possibly edited) files.

    Segment files stay where they are (a model may still refer to them); the index now describes the merged
    text. Extra per-segment keys survive; the whole-file summary is dropped because it described old text.
    """
    index = {k: v for k, v in plan.index.items() if k != "summary"}
    line = 1
    offset = 0
    segments = []
    # The merged text's hash from its segments' bytes: encoding the whole merged text again would cost a copy of it.
    digest = hashlib.sha256()
    for position, (entry, text) in enumerate(plan.segments, 1):
        blob = text.encode("utf-8")
        digest.update(blob)
        n = count_lines(blob)
        if position - 1 in plan.repaired:
            atomic_write_bytes(segment_path(plan.folder, entry), blob)
        segments.append(
            {
                # No stamp survives this path: its texts may be staged ones, not the files' (the next patch reads).
                **{k: v for k, v in entry.items() if k != STAMP},
                "segment_index": position,
                "start_line_num": line,
                "end_line_num": line + n - 1,
                "start_byte": offset,
                "end_byte": offset + len(blob),
            }
        )
        line += n
        offset += len(blob)
    merged = plan.merged
    breaks = merged.count("\n") + merged.count("\r") - merged.count("\r\n")  # count_lines' rule, on the text
    index.update(
        source_sha256=digest.hexdigest(),
        source_size_bytes=offset,
        source_line_count=breaks + (1 if merged and merged[-1] not in "\r\n" else 0),
        segment_count=len(segments),
        segments=segments,
    )
    write_index(plan.index_path, index)
    remove_stale_segments(plan.index_path, index, plan.index)
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
    max_bytes: int | None = None,
) -> SplitResult:
    """Split `text` (the content of `source`) into a fresh `splits_dir/<slug(stem)>-<uuid4>/`. A text over
    `max_bytes` (maxFileBytes, when the caller did not bound the text itself) is refused, as its patch would be."""
    if target_bytes <= 0:
        raise SplitError("target bytes must be a positive number")
    data = text.encode("utf-8")
    if max_bytes is not None and len(data) > max_bytes:
        raise SplitError(
            f"{source} is {len(data)} bytes, more than maxFileBytes ({max_bytes}); "
            "raise the maxFileBytes setting to split and patch it"
        )
    kind = normalize_split_type(split_type) if split_type else detect_split_type(source)
    out_dir = new_split_dir(Path(splits_dir).resolve(), source)  # segment paths name the real folder
    index, blobs = build_index(data, source, out_dir, kind, target_bytes, natural)
    index_path = out_dir / INDEX
    write_split(index_path, index, blobs)
    return SplitResult(index_path, index)


def refresh_split(index_path: Path, text: str) -> dict[str, Any]:
    """Re-split `text` into the same directory with the index's settings; delete the old index's segments that
    are no longer used."""
    old = load_index(index_path)
    source = Path(old["source_path"])
    out_dir = index_path.parent
    kind = normalize_split_type(old.get("split_type") or detect_split_type(source))
    index, blobs = build_index(text.encode("utf-8"), source, out_dir, kind, *_settings(old))
    write_split(index_path, index, blobs)
    remove_stale_segments(index_path, index, old)
    return index


def _settings(index: Mapping[str, Any]) -> tuple[int, bool]:
    target = index.get("target_bytes")
    return (target if type(target) is int and target > 0 else TARGET_BYTES_DEFAULT), index.get("natural") is True


# -- an edit run's splits, in memory -----------------------------------------------------------------------


@dataclass
class StagedSplits:
    """The splits one edit run has seen, as that run sees them.

    `splits` maps each index path to the index as the run knows it (loaded from disk, made by the run, or
    re-split in memory after a merge); `texts` holds segment texts the run wrote or re-split, which win over
    the files on disk; `unmerged` the segments written since their split was last merged. `on_disk` marks the
    splits whose folder exists; those the run `used` (read through <nagent-file-read> or merged) are re-split
    from the applied text once the change is applied."""

    splits: dict[Path, TrustedSplit] = field(default_factory=dict)
    texts: dict[Path, str] = field(default_factory=dict)
    unmerged: set[Path] = field(default_factory=set)
    on_disk: set[Path] = field(default_factory=set)
    used: set[Path] = field(default_factory=set)  # index paths the run read through or merged

    def remember(self, split: TrustedSplit, on_disk: bool = True, use: bool = False) -> TrustedSplit:
        known = self.splits.setdefault(split.index_path, split)
        if on_disk:
            self.on_disk.add(split.index_path)
        if use:
            self.used.add(split.index_path)
        return known

    def owner(self, segment: Path) -> TrustedSplit | None:
        """The known split that lists `segment` (resolved) as one of its segments."""
        split = self.splits.get(segment.parent / INDEX)
        if split is not None and segment in split.paths:
            return split
        return None

    def text(self, segment: Path) -> str | None:
        return self.texts.get(segment)

    def write(self, segment: Path, content: str) -> None:
        self.texts[segment] = content
        self.unmerged.add(segment)

    def resplit(self, split: TrustedSplit, text: str) -> TrustedSplit:
        """After a merge: the split now describes `text`, in memory (its folder on disk is left alone)."""
        old = split.segment_paths()
        kind = normalize_split_type(split.index.get("split_type") or detect_split_type(split.source))
        index, blobs = build_index(text.encode("utf-8"), split.source, split.folder, kind, *_settings(split.index))
        fresh = TrustedSplit(split.index_path, index, split.source)
        for path in old:
            self.texts.pop(path, None)
            self.unmerged.discard(path)
        for path, blob in zip(fresh.segment_paths(), blobs, strict=False):
            self.texts[path] = blob.decode("utf-8")
        self.splits[split.index_path] = fresh
        self.used.add(split.index_path)
        return fresh

    def in_memory_split(self, text: str, source: Path, splits_dir: Path) -> TrustedSplit:
        """A split of text that exists only in this run (the target with unapplied edits): its folder is
        named but not created."""
        folder = split_dir_name(Path(splits_dir).resolve(), source)
        kind = detect_split_type(source)
        index, blobs = build_index(text.encode("utf-8"), source, folder, kind, TARGET_BYTES_DEFAULT, False)
        split = TrustedSplit(folder / INDEX, index, source)
        for path, blob in zip(split.segment_paths(), blobs, strict=False):
            self.texts[path] = blob.decode("utf-8")
        self.splits[split.index_path] = split
        self.used.add(split.index_path)
        return split

    def pending(self) -> list[Path]:
        """Segments written and never merged with <nagent-file-patch> (they are not part of the change)."""
        return sorted(self.unmerged)


def detect_split_type(source: Path) -> str:
    from nagent_lsp.text.split_rules import detect_split_type as detect  # loaded by splitting, not by a patch

    return detect(source)


def normalize_split_type(split_type: str) -> str:
    from nagent_lsp.text.split_rules import normalize_split_type as normalize

    return normalize(split_type)
