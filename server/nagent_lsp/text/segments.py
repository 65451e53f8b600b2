"""Cut a file's bytes into segments of about `target_bytes` at natural boundaries.

Works on the whole byte string with regex scans and `bytes.count` (C speed) rather than per-line Python,
so 10 MB files split in a fraction of a second. Cuts only ever fall at line starts (never inside a CRLF
pair or a UTF-8 sequence), so concatenating the segments gives back the exact bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nagent_lsp.core.identity import sha256_hex
from nagent_lsp.core.limits import SPLIT_TARGET as TARGET_BYTES_DEFAULT

if TYPE_CHECKING:
    from nagent_lsp.text.split_rules import RuleSet
# text.split_rules (its regexes compiled at import) is loaded by the split itself: a patch only counts lines.

_EOL = re.compile(rb"\r\n|\n|\r")
# Boundaries weighed per segment at most, latest first, when none of the best kind turns up. Source files
# have a few hundred candidates in a 32 KiB window and usually meet a best one within the last few; a file where
# every one of millions of lines is a boundary (nothing but newlines, or blank lines inside an unclosed brace)
# would otherwise cost Python work for each of them.
MAX_WEIGHED = 1024
_INDENT = re.compile(rb"[ \t]*")


@dataclass(frozen=True)
class Segment:
    index: int  # from 1
    start_line: int  # from 1, inclusive
    end_line: int  # inclusive; start_line - 1 for an empty segment
    start_byte: int
    end_byte: int


def count_lines(data: bytes, a: int = 0, b: int | None = None) -> int:
    """Lines in data[a:b] under LSP/nagent rules (\\r\\n, \\n, \\r); a final unterminated line counts."""
    b = len(data) if b is None else b
    if b <= a:
        return 0
    breaks = data.count(b"\n", a, b) + data.count(b"\r", a, b) - data.count(b"\r\n", a, b)
    return breaks + (0 if data[b - 1] in (10, 13) else 1)


class _Cutter:
    def __init__(self, data: bytes, rules: RuleSet):
        self.data = data
        self.rules = rules

    def depth(self, base_pos: int, base_depth: int, p: int) -> int:
        """Bracket depth at `p`, counted from a known (position, depth) on either side of it."""
        if self.rules.depth is None:
            return 0
        if p >= base_pos:
            return base_depth + self.rules.depth(self.data, base_pos, p)
        return base_depth - self.rules.depth(self.data, p, base_pos)

    def tier(self, group: str, depth: int) -> int:
        for max_depth, tier in self.rules.tiers[group]:
            if max_depth is None or max(depth, 0) <= max_depth:
                return tier
        return 0

    def candidates(self, begin: int, end: int, pattern: re.Pattern[bytes] | None = None) -> Iterator[tuple[int, str]]:
        """(position, group) for every boundary p with begin < p <= end, in order (of `pattern`'s kinds, by
        default every kind)."""
        data = self.data
        pattern = self.rules.pattern if pattern is None else pattern
        # Matches sit on the newline before a line: start at the one before the line holding `begin`.
        scan_from = max(data.rfind(b"\n", 0, begin), 0)
        # A match's lookahead reads at most the line after its newline and one character beyond it, so the
        # scan stops there instead of running on to the end of the file when the window holds no boundary
        # (that made splitting quadratic: every window scanned the whole rest of the file).
        stop = min(len(data), self.line_end(self.line_end(end)) + 1)
        for m in pattern.finditer(data, scan_from, stop):
            if m.start() >= end:
                break
            group = m.lastgroup
            assert group is not None  # every alternative of a rule set is a named group
            p = m.end(group) if group[0] == "a" else m.start(group)
            if begin < p <= end:
                yield p, group

    def hop_back(self, p: int, floor: int) -> int:
        """Move a before-declaration cut above the comments/decorators attached to it."""
        data = self.data
        # Only lines at the declaration's own indentation belong to it (not the end of the previous body).
        found = _INDENT.match(data, p)  # always matches: the pattern may match nothing
        indent = found.group() if found else b""
        prefixes = tuple(indent + x for x in self.rules.hop_back)
        for _ in range(64):
            if p <= floor + 1:
                break
            prev = data.rfind(b"\n", 0, p - 1) + 1
            if prev <= floor or not data.startswith(prefixes, prev):
                break
            p = prev
        return p

    def line_end(self, q: int) -> int:
        m = _EOL.search(self.data, q)
        return m.end() if m else len(self.data)


def plan_segments(
    data: bytes,
    split_type: str = "txt",
    target_bytes: int = TARGET_BYTES_DEFAULT,
    natural: bool = False,
) -> list[Segment]:
    """Segments covering `data` exactly, in order. Empty input gives no segments."""
    if target_bytes <= 0:
        raise ValueError("target_bytes must be positive")
    from nagent_lsp.text.split_rules import RULES, normalize_split_type

    rules = RULES[normalize_split_type(split_type)]
    cutter = _Cutter(data, rules)
    cuts = _natural_cuts(cutter) if natural else _sized_cuts(cutter, target_bytes)
    segments: list[Segment] = []
    line = 1
    start = 0
    for end in cuts + [len(data)]:
        if end <= start:
            continue
        n = count_lines(data, start, end)
        segments.append(Segment(len(segments) + 1, line, line + n - 1, start, end))
        line += n
        start = end
    return segments


def _sized_cuts(cutter: _Cutter, target: int) -> list[int]:  # noqa: C901  2026-11-27: the hot loop of splitting (benchmarks/split.py); helpers cost calls per candidate
    data = cutter.data
    size = len(data)
    rules = cutter.rules
    top = rules.top_tier
    cuts: list[int] = []
    start, depth = 0, 0
    while True:
        if size - start <= target:
            return cuts
        reach = cutter.line_end(start + target - 1)
        if reach >= size:
            return cuts
        # Prefer the best tier, then the latest position, among cuts that keep the segment >= target/4.
        floor = start + max(1, target // 4)
        # Scan backwards from `reach` in growing chunks: the latest top-tier boundary is usually within the
        # last few KiB, so most of the window is never matched at all.
        best_p, best_tier, best_group = reach, -1, ""
        hi, step = reach, 256
        ref_pos, ref_depth = start, depth  # depth is counted from the nearest known point, not from `start`
        pattern: re.Pattern[bytes] | None = rules.pattern
        weighed = 0
        while hi >= floor and best_tier < top and pattern is not None and weighed < MAX_WEIGHED:
            lo = max(floor, hi - step)
            for p, group in reversed(list(cutter.candidates(lo - 1, hi, pattern))):
                weighed += 1
                if weighed > MAX_WEIGHED:
                    break
                ref_depth, ref_pos = cutter.depth(ref_pos, ref_depth, p), p
                t = cutter.tier(group, ref_depth)
                if t > best_tier:
                    best_p, best_tier, best_group = p, t, group
                    if t == top:
                        break
            hi, step = lo - 1, step * 2
            if best_tier >= 0:
                # Only a better kind can still win: the rest of the window is scanned for those alone.
                pattern = rules.pattern_above(best_tier)
        if best_tier < 0 and reach - start > 2 * target:
            # The line reaching the target is huge: end before it rather than drag it into this segment.
            early = list(cutter.candidates(start, floor - 1))
            if early:
                best_p, best_group = early[-1]
        cut = best_p
        if best_group.startswith("b") and rules.hop_back:
            cut = cutter.hop_back(cut, start)
        depth = cutter.depth(start, depth, cut)
        cuts.append(cut)
        start = cut


def _natural_cuts(cutter: _Cutter) -> list[int]:
    """Cut at every top-tier boundary (each paragraph, definition, section...)."""
    rules = cutter.rules
    top = rules.top_tier
    cuts: list[int] = []
    last, depth, pos = 0, 0, 0
    pattern = rules.pattern_above(top - 1)  # the kinds that can reach the top tier; the rest are never cuts
    if pattern is None:
        return cuts
    for p, group in cutter.candidates(0, len(cutter.data), pattern):
        if cuts and p <= cuts[-1]:
            continue
        d = cutter.depth(pos, depth, p)
        pos, depth = p, d
        if cutter.tier(group, d) != top or p >= len(cutter.data):
            continue
        cut = cutter.hop_back(p, last) if group.startswith("b") and rules.hop_back else p
        if cut > last:
            cuts.append(cut)
            last = cut
    return cuts


def segment_name(source: Path, index: int) -> str:
    return f"{source.stem}-{index:04d}{source.suffix}"


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
        "source_sha256": sha256_hex(data),
        "source_size_bytes": len(data),
        "source_line_count": count_lines(data),
        "split_type": split_type,
        "target_bytes": target_bytes,
        "natural": natural,
        "created_at": created_at or datetime.now(UTC).isoformat(),
        "segment_count": len(segments),
        "segments": [
            {
                "segment_index": s.index,
                "start_line_num": s.start_line,
                "end_line_num": s.end_line,
                # Where the segment's bytes lie in the source: a patch copies unchanged ones straight from it.
                "start_byte": s.start_byte,
                "end_byte": s.end_byte,
                "path": str(out_dir / segment_name(source, s.index)),
            }
            for s in segments
        ],
    }
    return index, [data[s.start_byte : s.end_byte] for s in segments]
