"""Three-way merge, and deciding what text a change should leave in a buffer that moved on since the run began.

Shared by every port: `plan_change_set` is the one change-set planner (the editor port sends its plan as edits,
the disk port writes it as one transaction, the next front end does either). The merge itself is
the `merge3` library's; we plug our own line diff into it as its sequence matcher, because difflib's matcher
(merge3's default) is quadratic on large files full of repeated lines, and ours anchors on unique lines first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import merge3 as _merge3

from nagent_lsp.core.ports import FileChange
from nagent_lsp.text.edits import line_opcodes, split_lines, trim_common_lines


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
class Current:
    """A file's text where a port finds it now (its editor buffer, else the disk); `text` None: no such file."""

    text: str | None
    version: int | None
    uri: str


@dataclass(frozen=True)
class PlannedFile:
    """One file of a planned change set: its text now (`current`, "" for a new file) and what it becomes."""

    change: FileChange
    uri: str
    version: int | None
    current: str
    target: str


@dataclass(frozen=True)
class ChangeSetPlan:
    """What to send or write for a change set: every file that changes, in the order given; or, when `conflict`
    names a file, nothing at all (`reason` says why). No file and no conflict: "no change"."""

    files: tuple[PlannedFile, ...] = ()
    reason: str | None = None
    conflict: Path | None = None
    conflict_text: str | None = None  # the conflicting file's current text


def plan_change_set(changes: Sequence[FileChange], current_of: Callable[[FileChange], Current]) -> ChangeSetPlan:
    """The one change-set planner every port uses (DESIGN §9): each file merged three ways against its current
    text (`current_of`, the port's view: buffers or the disk); a file created meanwhile with other content, or a
    merge conflict in any file, plans nothing. Files left as they are (already so) are not planned."""
    planned: list[PlannedFile] = []
    for change in changes:
        now = current_of(change)
        if change.created:
            if now.text is None:
                planned.append(PlannedFile(change, now.uri, now.version, "", change.new_text))
                continue
            if now.text == change.new_text:
                continue
            reason = f"conflict: {change.path} was created meanwhile with other content; nothing was applied"
            return ChangeSetPlan(reason=reason, conflict=change.path, conflict_text=now.text)
        current = now.text if now.text is not None else ""
        plan = plan_change(change.base_text, current, change.new_text)
        if plan.target is None:
            if plan.reason == "no change":
                continue
            why = f"{plan.reason} (in {change.path})" if len(changes) > 1 else plan.reason
            return ChangeSetPlan(reason=why, conflict=change.path, conflict_text=current)
        planned.append(PlannedFile(change, now.uri, now.version, current, plan.target))
    return ChangeSetPlan(tuple(planned), None if planned else "no change")


@dataclass(frozen=True)
class LineHunk:
    """One changed region of a base text: its lines [start, end) become `new_text` (`old_text` is what they held)."""

    start: int
    end: int
    old_text: str
    new_text: str


def line_hunks(base: str, new: str) -> list[LineHunk]:
    """The changed regions of base → new, in order: the hunks of a proposal (reviewed one by one)."""
    t = trim_common_lines(base, new)
    a, b = split_lines(base[t.start : t.old_end]), split_lines(new[t.start : t.new_end])
    first = t.first_line
    return [
        LineHunk(first + i1, first + i2, "".join(a[i1:i2]), "".join(b[j1:j2])) for i1, i2, j1, j2 in line_opcodes(a, b)
    ]


def with_hunks(base: str, hunks: Sequence[LineHunk]) -> str:
    """`base` with these of its hunks applied (and no other)."""
    lines = split_lines(base)
    for hunk in sorted(hunks, key=lambda h: h.start, reverse=True):
        lines[hunk.start : hunk.end] = [hunk.new_text] if hunk.new_text else []
    return "".join(lines)


@dataclass(frozen=True)
class HunkConflict:
    """A hunk `merge_hunks` left out, and why: `touched` are the lines (1-based, inclusive, of the base) another
    change touched on or next to the hunk's own (None when its lines moved out of reach instead)."""

    index: int
    touched: tuple[int, int] | None

    def why(self, name: str) -> str:
        if self.touched is None:
            return f"the lines of {name} are no longer near where they were (the file changed around them)"
        first, last = self.touched
        return f"the lines of {name} changed since the proposal was made (another change touched lines {first}-{last})"


def merge_hunks(base: str, current: str, hunks: Sequence[LineHunk]) -> tuple[str, list[HunkConflict]]:
    """Apply the hunks (of base) one at a time to `current` (base plus whatever changed since), and return the text
    and the hunks that no longer apply (left out). Each is merged three ways; where merge3 refuses — it also refuses
    changes on *adjacent* lines, which do not overlap — the hunk is put where its place maps to (`_splice`): a
    hunk applies whenever no other change touched its own lines."""
    text, conflicts = current, []
    for i, hunk in enumerate(hunks):
        merged = merge3(base, text, with_hunks(base, [hunk]))
        if merged is None:
            merged = _splice(base, text, hunk)
        if merged is None:
            conflicts.append(HunkConflict(i, _touched(base, text, hunk)))
        else:
            text = merged
    return text, conflicts


def _splice(base: str, text: str, hunk: LineHunk) -> str | None:
    """`text` with the hunk applied where its place maps to, when no change base → text touched its own lines
    (an insertion: none spans its place nor inserts at it, and a neighbour is still beside it); else None. Never
    searched for elsewhere: a lone repeated line (a blank, a `}`) would be found in the wrong place."""
    a, b = split_lines(base), split_lines(text)
    opcodes = line_opcodes(a, b)
    size = hunk.end - hunk.start
    at = _map_line(opcodes, hunk.start)
    if size:
        if any(i1 < hunk.end and i2 > hunk.start for i1, i2, _j1, _j2 in opcodes):
            return None
        if b[at : at + size] != a[hunk.start : hunk.end]:
            return None
    else:
        if any(i1 == i2 == hunk.start for i1, i2, _j1, _j2 in opcodes):
            return None  # the other change inserted at the same place: which goes first is not ours to guess
        if _beside(opcodes, a, b, hunk.start, at) is None:
            return None
    lines = list(b)
    lines[at : at + size] = [hunk.new_text] if hunk.new_text else []
    return "".join(lines)


def _touched(base: str, text: str, hunk: LineHunk) -> tuple[int, int] | None:
    """The base lines (1-based, inclusive) of the changes base → text that overlap the hunk's lines or touch them."""
    first = last = None
    for i1, i2, _j1, _j2 in line_opcodes(split_lines(base), split_lines(text)):
        if i1 <= hunk.end and i2 >= hunk.start:
            lo, hi = i1 + 1, max(i2, i1 + 1)
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
    return None if first is None or last is None else (first, last)


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
        if at is None and not size:
            at, lead = _beside(opcodes, a, b, hunk.start, hint), 0
        if at is None:
            start = min(hint, len(b))
            placed.append(Placed(start, min(start + size, len(b)), False))
        else:
            placed.append(Placed(at + lead, at + lead + size, True))
    return placed


def _beside(
    opcodes: Sequence[tuple[int, int, int, int]], a: Sequence[str], b: Sequence[str], start: int, hint: int
) -> int | None:
    """An insertion whose two neighbours are no longer next to each other (another change touched one of them):
    it still goes where its place maps to (`hint`, never searched for: a lone line such as a blank one repeats)
    when no change spans that place and the neighbour on one side is there, unchanged. None: it no longer applies."""
    if any(i1 < start < i2 for i1, i2, _j1, _j2 in opcodes):
        return None
    after = start < len(a) and hint < len(b) and b[hint] == a[start]
    before = start > 0 and 0 < hint <= len(b) and b[hint - 1] == a[start - 1]
    return hint if after or before else None


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
