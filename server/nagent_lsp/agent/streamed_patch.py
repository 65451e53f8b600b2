"""A patch of a file on disk planned segment by segment: the merged text is never built.

`plan_patch` holds the current text, every segment's text and their merge as whole strings and diffs the whole old
file against the whole new one; for a 50 MB file that is seconds of Python and ~1 GB. The index already says where
each segment's bytes lie in the source (`start_byte`/`end_byte`, written by the split and by every re-index), and
the source is checked against the index's hash, so a segment whose file still holds those bytes is unchanged. Only
the changed segments are decoded and diffed (with their unchanged neighbours as context); the new file is streamed
to its transaction as the source's own bytes for the unchanged ranges and the segment files' bytes for the changed
ones, hashed as it is written; the index is renumbered from per-segment line counts.

`plan_streamed` returns None when the index cannot be used this way (an index from before byte offsets, offsets
that do not tile the source): the caller then takes the whole-text path.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nagent_lsp.agent.splits import TrustedSplit, checked_entries, too_large_to_merge
from nagent_lsp.core.errors import PatchError, SplitError
from nagent_lsp.store.atomic import atomic_write_stat
from nagent_lsp.store.split_index import (
    STAMP,
    SegmentsTooLarge,
    UntrustedIndex,
    file_stamp,
    read_segment_stat,
    segment_path,
    segment_paths,
    settled_stamp,
    stamp_holds,
    write_index,
)
from nagent_lsp.store.transaction import Digest
from nagent_lsp.text.edits import minimal_edits, unified_diff
from nagent_lsp.text.segments import count_lines

CHUNK = 1 << 20  # bytes handed to the writer at a time: large enough for few calls, small enough to stay flat


@dataclass
class StreamedPlan:
    """What a patch changes, by segment: the source's bytes (checked against the index), the sorted index entries
    and the new bytes of the changed ones (position → bytes, a dropped final line break restored)."""

    split: TrustedSplit
    source: bytes
    entries: list[dict[str, Any]]
    changed: dict[int, bytes]
    repaired: list[int]
    heads: list[Digest]  # heads[i]: the hash of the source's bytes before segment i (see _hash_by_segment)
    stamps: dict[int, list[int] | None]  # the new stamps of the segment files read (store.split_index.STAMP)

    def hashed_head(self) -> tuple[int, Digest] | None:
        """The new file's first bytes that are the source's, with their hash (`Write.hashed_head`)."""
        if not self.changed:
            return None
        first = min(self.changed)
        return self.entries[first]["start_byte"], self.heads[first]

    @property
    def size(self) -> int:
        return sum(self._length(i) for i in range(len(self.entries)))

    def _length(self, i: int) -> int:
        new = self.changed.get(i)
        return len(new) if new is not None else self.entries[i]["end_byte"] - self.entries[i]["start_byte"]

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The new file's bytes in order: runs of unchanged segments straight from the source, changed ones from
        their files."""
        view = memoryview(self.source)
        run_start: int | None = None
        for i, entry in enumerate(self.entries):
            new = self.changed.get(i)
            if new is None:
                run_start = entry["start_byte"] if run_start is None else run_start
                continue
            if run_start is not None:
                yield from _pieces(view, run_start, entry["start_byte"])
                run_start = None
            yield new
        if run_start is not None:
            yield from _pieces(view, run_start, len(self.source))

    def clusters(self) -> list[tuple[int, int]]:
        """Changed positions grouped (first, last, inclusive) so that no two groups share a neighbour: each group's
        diff takes the unchanged segment before and after it as context."""
        out: list[tuple[int, int]] = []
        for i in sorted(self.changed):
            if out and i - out[-1][1] <= 2:
                out[-1] = (out[-1][0], i)
            else:
                out.append((i, i))
        return out

    def _excerpt(self, first: int, last: int) -> tuple[int, str, str]:
        """(0-based first line, old text, new text) of segments first-1 … last+1."""
        lo, hi = max(first - 1, 0), min(last + 1, len(self.entries) - 1)
        old = self.source[self.entries[lo]["start_byte"] : self.entries[hi]["end_byte"]]
        new = b"".join(
            self.changed.get(i, self.source[self.entries[i]["start_byte"] : self.entries[i]["end_byte"]])
            for i in range(lo, hi + 1)
        )
        return self.entries[lo]["start_line_num"] - 1, old.decode("utf-8"), new.decode("utf-8")

    def diff_and_edits(self, label: str) -> tuple[str, int]:
        """The unified diff of the whole change (hunks in file order, one header) and how many minimal edits it
        takes, computed per group of changed segments."""
        parts: list[str] = []
        edits = 0
        for first, last in self.clusters():
            line, old, new = self._excerpt(first, last)
            edits += len(minimal_edits(old, new, "utf-32"))
            diff = unified_diff(old, new, label, first_line=line)
            if diff:
                parts.append(diff if not parts else diff.split("\n", 2)[2])
        return "".join(parts), edits

    def reindex(self, new_sha256: str) -> dict[str, Any]:
        """After the new file was written (its sha256 given): the index renumbered over the segments, the repaired
        segment files rewritten; written and returned."""
        index = {k: v for k, v in self.split.index.items() if k != "summary"}
        folder = self.split.folder
        line, offset = 1, 0
        segments = []
        for position, entry in enumerate(self.entries):
            new = self.changed.get(position)
            if new is None:
                lines = entry["end_line_num"] - entry["start_line_num"] + 1
                size = entry["end_byte"] - entry["start_byte"]
            else:
                lines, size = count_lines(new), len(new)
            stamp = self.stamps[position] if position in self.stamps else entry.get(STAMP)
            if position in self.repaired:
                stamp = file_stamp(atomic_write_stat(segment_path(folder, entry), new or b""))
            entry = {k: v for k, v in entry.items() if k != STAMP}
            if stamp is not None:
                entry[STAMP] = stamp
            segments.append(
                {
                    **entry,
                    "segment_index": position + 1,
                    "start_line_num": line,
                    "end_line_num": line + lines - 1,
                    "start_byte": offset,
                    "end_byte": offset + size,
                }
            )
            line += lines
            offset += size
        index.update(
            source_sha256=new_sha256,
            source_size_bytes=offset,
            source_line_count=line - 1,
            segment_count=len(segments),
            segments=segments,
        )
        write_index(self.split.index_path, index)
        return index


def _pieces(view: memoryview, start: int, end: int) -> Iterator[memoryview]:
    for at in range(start, end, CHUNK):
        yield view[at : min(at + CHUNK, end)]


def _tiles(entries: list[dict[str, Any]], size: int) -> bool:
    """Whether the entries' byte ranges cover 0..size in order, without gaps or overlaps."""
    at = 0
    for entry in entries:
        start, end = entry.get("start_byte"), entry.get("end_byte")
        if type(start) is not int or type(end) is not int or start != at or end < start:
            return False
        at = end
    return at == size


def _newline(data: bytes) -> bytes:
    return b"\r\n" if b"\r\n" in data else (b"\r" if b"\r" in data and b"\n" not in data else b"\n")


def plan_streamed(split: TrustedSplit, source: bytes, *, max_bytes: int) -> StreamedPlan | None:
    """Check `source` (the file's current bytes) against the index and find the changed segments; PatchError when
    the file changed since the split, None when the index has no usable byte offsets."""
    index: Mapping[str, Any] = split.index
    expected = index.get("source_sha256")
    entries = checked_entries(index)
    if not expected or not _tiles(entries, len(source)):
        return None
    # The source is hashed while the segments are read (hashlib lets go of the GIL on large data), segment by
    # segment: the hash of the bytes before each segment is kept, so the new file's hash starts from the one before
    # its first changed segment instead of hashing its unchanged head again.
    heads: list[Digest] = []
    hasher = threading.Thread(target=_hash_by_segment, args=(source, entries, heads), daemon=True)
    hasher.start()
    try:
        changed, stamps = _changed_segments(split, entries, source, max_bytes)
    finally:
        hasher.join()
    actual = heads[-1].hexdigest()
    if actual != expected:
        raise PatchError(
            f"source hash does not match index.json (expected {expected}, got {actual}): "
            f"{split.source.name} changed since it was split; split it again, or patch with force"
        )
    # A segment is a run of whole lines: a non-final segment whose last line break an edit dropped gets it back
    # (as plan_patch does), or its last line would join the next segment's first.
    # The file's line break is looked up only when a repair needs it: finding it scans the whole source.
    repaired = [p for p, raw in changed.items() if p < len(entries) - 1 and raw and not raw.endswith((b"\n", b"\r"))]
    if repaired:
        newline = _newline(source)
        for position in repaired:
            changed[position] += newline
    return StreamedPlan(split, source, entries, changed, repaired, heads, stamps)


def _hash_by_segment(source: bytes, entries: list[dict[str, Any]], heads: list[Digest]) -> None:
    """heads[i]: the sha256 of source[:entries[i]["start_byte"]]; heads[-1] (one more): of the whole source."""
    digest = hashlib.sha256()
    view = memoryview(source)
    for entry in entries:
        heads.append(digest.copy())
        digest.update(view[entry["start_byte"] : entry["end_byte"]])
    heads.append(digest)


def _changed_segments(
    split: TrustedSplit, entries: list[dict[str, Any]], source: bytes, max_bytes: int
) -> tuple[dict[int, bytes], dict[int, list[int] | None]]:
    """position → bytes of each segment whose file no longer holds its range of `source`; and position → the new
    stamp of each segment file read (None: not stamped). A file whose stamp holds is not read."""
    changed: dict[int, bytes] = {}
    stamps: dict[int, list[int] | None] = {}
    total = 0
    try:
        paths = segment_paths(split.folder, entries)
        index_mtime = os.stat(split.index_path).st_mtime_ns
    except UntrustedIndex as exc:
        raise PatchError(str(exc)) from None
    except OSError as exc:
        raise PatchError(f"index cannot be read: {split.index_path} ({exc.strerror or exc})") from None
    now = time.time_ns()
    for position, entry in enumerate(entries):
        start, end = entry["start_byte"], entry["end_byte"]
        if stamp_holds(paths[position], entry, index_mtime):
            total += end - start
            if total > max_bytes:
                raise PatchError(too_large_to_merge(max_bytes))
            continue
        raw, st = _segment_bytes(paths[position], max(0, max_bytes - total), max_bytes)
        total += len(raw)
        if total > max_bytes:
            raise PatchError(too_large_to_merge(max_bytes))
        stamps[position] = settled_stamp(st, now)
        if len(raw) == end - start and source.startswith(raw, start):
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            path = paths[position]
            raise PatchError(f"segment is not valid UTF-8: {path} ({exc.reason} at byte {exc.start})") from None
        changed[position] = raw
    return changed, stamps


def _segment_bytes(path: str, limit: int, max_bytes: int) -> tuple[bytes, os.stat_result]:
    try:
        return read_segment_stat(path, limit)
    except SegmentsTooLarge:
        raise PatchError(too_large_to_merge(max_bytes)) from None
    except (SplitError, UntrustedIndex) as exc:
        raise PatchError(str(exc)) from None
