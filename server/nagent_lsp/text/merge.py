"""Three-way merge, and deciding what text a change should leave in a buffer that moved on since the run began.

Shared by every port: the editor port sends the result as edits, the disk port writes it. The merge itself is
the `merge3` library's; we plug our own line diff into it as its sequence matcher, because difflib's matcher
(merge3's default) is quadratic on large files full of repeated lines, and ours anchors on unique lines first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import merge3 as _merge3

from nagent_lsp.text.edits import line_opcodes, split_lines


class _AnchoredMatcher:
    """The part of difflib.SequenceMatcher's interface merge3 uses, answered by `line_opcodes`."""

    def __init__(self, junk: object, a: Sequence[str], b: Sequence[str]):
        self.a, self.b = list(a), list(b)

    def get_matching_blocks(self) -> list[tuple[int, int, int]]:
        blocks: list[tuple[int, int, int]] = []
        i = j = 0
        for i1, i2, _j1, j2 in line_opcodes(self.a, self.b):
            if i1 > i:
                blocks.append((i, j, i1 - i))
            i, j = i2, j2
        if len(self.a) > i:
            blocks.append((i, j, len(self.a) - i))
        blocks.append((len(self.a), len(self.b), 0))  # difflib's sentinel, which merge3 relies on
        return blocks


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """Line-based three-way merge; None when both sides changed the same or touching lines differently."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    base_lines, our_lines, their_lines = split_lines(base), split_lines(ours), split_lines(theirs)
    merger = _merge3.Merge3(base_lines, our_lines, their_lines, sequence_matcher=_AnchoredMatcher)
    out: list[str] = []
    for region in merger.merge_regions():
        kind = region[0]
        if kind == "conflict":
            return None
        if kind == "unchanged":
            out.extend(base_lines[region[1] : region[2]])
        elif kind in ("a", "same"):
            out.extend(our_lines[region[1] : region[2]])
        else:  # "b"
            out.extend(their_lines[region[1] : region[2]])
    return "".join(out)


@dataclass(frozen=True)
class Plan:
    target: str | None  # None: nothing to apply (see reason)
    reason: str | None = None


def plan_change(base_text: str, current_text: str, new_text: str) -> Plan:
    """Three-way: the model changed base→new while the user changed base→current."""
    target: str | None = new_text
    if current_text != base_text:
        target = merge3(base_text, current_text, new_text)
        if target is None:
            return Plan(
                None,
                "conflict: the buffer changed while the model worked and both touched the same lines; "
                "nothing was applied",
            )
    if target == current_text:
        return Plan(None, "no change")
    return Plan(target)


@dataclass(frozen=True)
class LineHunk:
    """One changed region of a base text: its lines [start, end) become `new_text` (`old_text` is what they held)."""

    start: int
    end: int
    old_text: str
    new_text: str


def line_hunks(base: str, new: str) -> list[LineHunk]:
    """The changed regions of base → new, in order: the hunks of a proposal (reviewed one by one)."""
    a, b = split_lines(base), split_lines(new)
    return [LineHunk(i1, i2, "".join(a[i1:i2]), "".join(b[j1:j2])) for i1, i2, j1, j2 in line_opcodes(a, b)]


def with_hunks(base: str, hunks: Sequence[LineHunk]) -> str:
    """`base` with these of its hunks applied (and no other)."""
    lines = split_lines(base)
    for hunk in sorted(hunks, key=lambda h: h.start, reverse=True):
        lines[hunk.start : hunk.end] = [hunk.new_text] if hunk.new_text else []
    return "".join(lines)


def merge_hunks(base: str, current: str, hunks: Sequence[LineHunk]) -> tuple[str, list[int]]:
    """Apply the hunks (of base) one at a time to `current` (base plus whatever the user changed since), merging
    three ways; returns the text and the indexes of the hunks that no longer apply (left out)."""
    text, conflicts = current, []
    for i, hunk in enumerate(hunks):
        merged = merge3(base, text, with_hunks(base, [hunk]))
        if merged is None:
            conflicts.append(i)
        else:
            text = merged
    return text, conflicts


NEAR = 100  # lines: how far from where a hunk's lines should be `place_hunks` looks for them


@dataclass(frozen=True)
class Placed:
    """Where a hunk of a base text is in the current text: its old lines are [start, end) there. `found` is False
    when they are no longer there (the user changed them): start/end then say where they would have been."""

    start: int
    end: int
    found: bool


def place_hunks(base: str, current: str, hunks: Sequence[LineHunk]) -> list[Placed]:
    """Each hunk (of `base`) in `current`: its recorded place is carried through the user's edits (one line diff of
    base → current), then its old lines are looked for there and, failing that, at the nearest place within NEAR
    lines (an insertion, which has no old lines, by the base lines on either side of it). A hunk whose lines are
    not found no longer applies as proposed."""
    a, b = split_lines(base), split_lines(current)
    opcodes = [] if base == current else line_opcodes(a, b)
    placed = []
    for hunk in hunks:
        hint = _map_line(opcodes, hunk.start)
        size = hunk.end - hunk.start
        if size:
            want, lead = a[hunk.start : hunk.end], 0
        else:  # an insertion: the lines around it must still be there, next to each other
            lead = 1 if hunk.start > 0 else 0
            want = a[hunk.start - lead : hunk.start + 1]
        at = _nearest(b, want, hint - lead)
        if at is None:
            start = min(hint, len(b))
            placed.append(Placed(start, min(start + size, len(b)), False))
        else:
            placed.append(Placed(at + lead, at + lead + size, True))
    return placed


def _map_line(opcodes: Sequence[tuple[int, int, int, int]], line: int) -> int:
    """Where line `line` of the base is in the current text (the start of the region that replaced it, if it
    changed)."""
    shift = 0
    for i1, i2, j1, j2 in opcodes:
        if i1 > line:
            break
        if line < i2:
            return j1
        shift = j2 - i2
    return line + shift


def _nearest(lines: Sequence[str], want: Sequence[str], hint: int) -> int | None:
    """The start nearest to `hint` (within NEAR) where `lines` hold `want`; None when nowhere."""
    if not want:
        return max(0, min(hint, len(lines)))
    last = len(lines) - len(want)
    for distance in range(NEAR + 1):
        for at in (hint - distance, hint + distance) if distance else (hint,):
            if 0 <= at <= last and lines[at] == want[0] and list(lines[at : at + len(want)]) == list(want):
                return at
    return None
