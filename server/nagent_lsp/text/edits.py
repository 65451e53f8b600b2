"""Old text + new text -> minimal edits, in an LSP position encoding; plus apply and unified diff (merge: text.merge).

Pure: no editor, no disk. Lines follow LSP rules (\\r\\n, \\r and \\n each end a line; other Unicode breaks do
not). Edits never start or end between the \\r and \\n of a CRLF pair, so every position is unambiguous.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

ENCODINGS = ("utf-16", "utf-8", "utf-32")

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_BREAK_RE = re.compile(r"\r\n|\r|\n")
# What str.splitlines also breaks at but LSP does not: a text without any of these splits the same both ways.
_OTHER_BREAKS_RE = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class TextEditSpec:
    """Replace old text between two positions (0-based lines, characters in the chosen encoding)."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int
    new_text: str


def split_lines(text: str) -> list[str]:
    """Lines with their terminators kept; "".join(result) == text."""
    if _OTHER_BREAKS_RE.search(text) is None:
        return text.splitlines(keepends=True)  # the same lines, several times faster (issue 29)
    return _LINE_RE.findall(text)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in _BREAK_RE.finditer(text))
    return starts


def _units(s: str, encoding: str) -> int:
    if encoding == "utf-16":
        # Astral characters take two UTF-16 code units.
        return len(s.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    if encoding == "utf-32":
        return len(s)
    raise ValueError(f"unsupported position encoding: {encoding!r} (expected one of {', '.join(ENCODINGS)})")


def _offset(text: str, starts: list[int], line: int, char: int, encoding: str) -> int:
    if line < 0 or char < 0:
        raise ValueError(f"negative position ({line}, {char})")
    if line >= len(starts):
        return len(text)  # LSP: a line past the end means the end of the document
    begin = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = text[begin:end].rstrip("\r\n") if line + 1 < len(starts) else text[begin:end]
    if encoding == "utf-32":
        return begin + min(char, len(content))
    if encoding not in ENCODINGS:
        _units("", encoding)  # raises the uniform error
    codec, width = ("utf-16-le", 2) if encoding == "utf-16" else ("utf-8", 1)
    raw = content.encode(codec)
    if char * width >= len(raw):
        return begin + len(content)  # LSP: a character past the line end means the line end
    try:
        return begin + len(raw[: char * width].decode(codec))
    except UnicodeDecodeError:
        raise ValueError(f"position ({line}, {char}) splits a character in {encoding}") from None


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on slices: C-speed comparisons instead of a Python loop
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = min(len(a), len(b), limit)
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


_BLOCK = 1 << 20  # characters compared per slice: C-speed comparisons with bounded temporary copies


def _prefix_len(a: str, b: str) -> int:
    """Length of the common prefix, comparing block by block (a 50 MB text costs ~50 slice pairs, not a copy)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _BLOCK] == b[i : i + _BLOCK]:
        i += _BLOCK
    if i >= n:
        return n
    return i + _common_prefix(a[i : i + _BLOCK], b[i : i + _BLOCK])


def _suffix_len(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most `limit`, compared block by block like `_prefix_len`."""
    n = min(len(a), len(b), limit)
    i = 0
    while i + _BLOCK <= n and a[len(a) - i - _BLOCK : len(a) - i] == b[len(b) - i - _BLOCK : len(b) - i]:
        i += _BLOCK
    rest = min(_BLOCK, n - i)
    return i + _common_suffix(a[len(a) - i - rest : len(a) - i], b[len(b) - i - rest : len(b) - i], rest)


def _last_break_end(text: str, end: int) -> int:
    """The start of the line holding position `end` (0 when no line break comes before it)."""
    return max(text.rfind("\n", 0, end), text.rfind("\r", 0, end)) + 1


def _next_break_end(text: str, start: int) -> int:
    """The position just after the first line break at or after `start` (len(text) when there is none)."""
    found = [i for i in (text.find("\n", start), text.find("\r", start)) if i >= 0]
    if not found:
        return len(text)
    i = min(found)
    return i + 2 if text.startswith("\r\n", i) else i + 1


def line_count_before(text: str, offset: int) -> int:
    """LSP line number of `offset` when it is a line start: \r\n, \r and \n each end one line."""
    return text.count("\n", 0, offset) + text.count("\r", 0, offset) - text.count("\r\n", 0, offset)


@dataclass(frozen=True)
class Trimmed:
    """`old` and `new` with their common whole-line head and tail cut off: `old[start:old_end]` became
    `new[start:new_end]`; `first_line` is the line number of `start` (the same in both)."""

    start: int
    old_end: int
    new_end: int
    first_line: int


def _line_before(text: str, start: int) -> int:
    """The start of the line before the line starting at `start` (> 0)."""
    end = start - 2 if start >= 2 and text.startswith("\r\n", start - 2) else start - 1
    return _last_break_end(text, end)


def trim_common_lines(old: str, new: str, context: int = 0) -> Trimmed:
    """The changed middle of two texts, cut at line boundaries, keeping `context` equal lines on each side.

    Every whole-text diff of nagent (edits, patches, hunks) runs on this middle: a one-line change in a 50 MB
    file then splits and diffs a few lines, not a million (issue 29). Never cuts inside a \r\n pair."""
    start = _last_break_end(old, _prefix_len(old, new))
    # A cut just after a \r that one side follows with \n would split a line break: start that line over.
    while start and old[start - 1] == "\r" and (old.startswith("\n", start) or new.startswith("\n", start)):
        start = _last_break_end(old, start - 1)
    s = _suffix_len(old, new, min(len(old), len(new)) - start)  # limited by the head: the two never overlap
    for _ in range(context):
        if start:
            start = _line_before(old, start)
    old_end, new_end = len(old), len(new)
    if s:
        # The tail starts after the first line break that begins inside the common suffix: whatever precedes
        # it, that break is whole and the same in both texts, so the cut is a line start in both.
        kept = len(old) - _next_break_end(old, len(old) - s)
        old_end, new_end = len(old) - kept, len(new) - kept
        for _ in range(context):
            if old_end < len(old):
                step = _next_break_end(old, old_end) - old_end
                old_end, new_end = old_end + step, new_end + step
    return Trimmed(start, old_end, new_end, line_count_before(old, start))


def line_opcodes(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """Changed line ranges (i1, i2, j1, j2); common head and tail are stripped first so big files stay fast."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    if not a_mid and not b_mid:
        return []
    if not a_mid or not b_mid:
        return [(head, head + len(a_mid), head, head + len(b_mid))]
    return [(i1 + head, i2 + head, j1 + head, j2 + head) for i1, i2, j1, j2 in _anchored(a_mid, b_mid)]


# Lines: below this a plain SequenceMatcher is fast enough on any content. Not more: on lines that repeat (blank lines,
# braces) SequenceMatcher is quadratic, so a 750-line middle with every other line blank took ~15 ms (issue 29).
SMALL_GAP = 100


def _anchored(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """Changed ranges, anchored on lines that occur exactly once on each side (patience diff).

    difflib alone is quadratic on files full of repeated lines (blank lines, braces); lines unique to both
    sides pin the alignment so only the small gaps between them need a general diff."""
    if len(a) <= SMALL_GAP and len(b) <= SMALL_GAP:
        return _plain(a, b, autojunk=False)
    from collections import Counter  # counted in C; imported here like difflib: start-up does not diff

    count_a, count_b = Counter(a), Counter(b)
    where_b = dict(zip(b, range(len(b)), strict=True))  # a line's last index: its only one when it is unique
    # Anchors as two lists of ints, not a list of pairs: thousands of tuples kept alive set off the garbage
    # collector several times per diff (~2 ms of a 10k-line edit, issue 29); ints are not tracked.
    anchor_is = [i for i, line in enumerate(a) if count_a[line] == 1 and count_b[line] == 1]
    anchor_is, anchor_js = _increasing(anchor_is, [where_b[a[i]] for i in anchor_is])
    if not anchor_is:
        return _plain(a, b, autojunk=len(a) + len(b) > 20000)
    out: list[tuple[int, int, int, int]] = []
    prev_i = prev_j = 0
    for i, j in zip([*anchor_is, len(a)], [*anchor_js, len(b)], strict=True):
        if (i > prev_i or j > prev_j) and a[prev_i:i] != b[prev_j:j]:
            gap = (
                _anchored(a[prev_i:i], b[prev_j:j])
                if (i - prev_i, j - prev_j) != (len(a), len(b))
                else _plain(a[prev_i:i], b[prev_j:j], True)
            )
            out.extend((i1 + prev_i, i2 + prev_i, j1 + prev_j, j2 + prev_j) for i1, i2, j1, j2 in gap)
        prev_i, prev_j = i + 1, j + 1
    return _coalesce(out)


def _plain(a: list[str], b: list[str], autojunk: bool) -> list[tuple[int, int, int, int]]:
    if not a or not b:
        return [(0, len(a), 0, len(b))] if (a or b) else []
    import difflib  # only for the small gaps between anchors; importing it costs start-up time

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _increasing(is_: list[int], js: list[int]) -> tuple[list[int], list[int]]:
    """The longest run of pairs (is_[n], js[n]) increasing in both coordinates (`is_` comes sorted), O(n log n)."""
    if js == sorted(js):
        return is_, js  # the usual case, nothing moved: all of them (sorting sorted numbers is a linear pass in C)
    tails: list[int] = []  # tails[k]: index of the smallest tail of a run of length k+1
    links: list[int] = [-1] * len(js)
    tail_js: list[int] = []
    for n, j in enumerate(js):
        k = bisect_left(tail_js, j)
        if k == len(tail_js):
            tails.append(n)
            tail_js.append(j)
        else:
            tails[k] = n
            tail_js[k] = j
        links[n] = tails[k - 1] if k else -1
    run: list[int] = []
    n = tails[-1] if tails else -1
    while n != -1:
        run.append(n)
        n = links[n]
    run.reverse()
    return [is_[n] for n in run], [js[n] for n in run]


def _coalesce(ranges: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Merge touching ranges so one logical change is one hunk."""
    out: list[tuple[int, int, int, int]] = []
    for r in ranges:
        if out and out[-1][1] == r[0] and out[-1][3] == r[2]:
            last = out.pop()
            r = (last[0], r[1], last[2], r[3])
        out.append(r)
    return out


def _hunks(old: str, new: str) -> list[tuple[int, int, str]]:
    """(old start offset, old end offset, replacement) for each changed region, trimmed to characters."""
    whole_old, whole_new = old, new
    t = trim_common_lines(old, new)
    old, new = whole_old[t.start : t.old_end], whole_new[t.start : t.new_end]
    a, b = split_lines(old), split_lines(new)
    a_starts = list(accumulate(map(len, a), initial=0))
    b_starts = list(accumulate(map(len, b), initial=0))
    out = []
    for i1, i2, j1, j2 in line_opcodes(a, b):
        o_begin, o_end = a_starts[i1], a_starts[i2]
        n_begin, n_end = b_starts[j1], b_starts[j2]
        old_chunk, new_chunk = old[o_begin:o_end], new[n_begin:n_end]
        p = _common_prefix(old_chunk, new_chunk)
        # Never cut between \r and \n: that position means nothing in LSP coordinates.
        if p and old_chunk[p - 1] == "\r" and (old_chunk[p : p + 1] == "\n" or new_chunk[p : p + 1] == "\n"):
            p -= 1
        s = _common_suffix(old_chunk, new_chunk, min(len(old_chunk), len(new_chunk)) - p)
        if s and old_chunk[len(old_chunk) - s] == "\n":
            before_old = old_chunk[len(old_chunk) - s - 1 : len(old_chunk) - s]
            before_new = new_chunk[len(new_chunk) - s - 1 : len(new_chunk) - s]
            if before_old == "\r" or before_new == "\r":
                s -= 1
        replacement = new_chunk[p : len(new_chunk) - s]
        start, end = o_begin + p, o_end - s
        if start == end and not replacement:
            continue
        out.append((t.start + start, t.start + end, replacement))
    return out


def minimal_edits(old: str, new: str, encoding: str = "utf-16") -> list[TextEditSpec]:
    """Edits, in document order and non-overlapping, that turn `old` into `new` (positions refer to `old`)."""
    _units("", encoding)
    if old == new:
        return []
    cursor = _Cursor(old)
    edits = []
    for begin, end, replacement in _hunks(old, new):
        sl, sc = cursor.position(begin, encoding)
        el, ec = cursor.position(end, encoding)
        edits.append(TextEditSpec(sl, sc, el, ec, replacement))
    return edits


class _Cursor:
    """LSP positions of increasing offsets in one text, counting line breaks only between consecutive offsets (no
    table of every line start: that alone cost seconds and hundreds of MB on a 50 MB file)."""

    def __init__(self, text: str):
        self.text = text
        self.offset = 0
        self.line = 0
        self.line_start = 0

    def position(self, offset: int, encoding: str) -> tuple[int, int]:
        text, last = self.text, self.offset
        breaks = text.count("\n", last, offset) + text.count("\r", last, offset) - text.count("\r\n", last, offset)
        if breaks:
            self.line += breaks
            self.line_start = _last_break_end(text, offset)
        self.offset = offset
        return self.line, _units(text[self.line_start : offset], encoding)


def apply_edits(text: str, edits: list[TextEditSpec], encoding: str = "utf-16") -> str:
    """Apply edits whose positions all refer to `text` (LSP semantics); overlapping edits are an error."""
    starts = _line_starts(text)
    spans = []
    for order, e in enumerate(edits):
        begin = _offset(text, starts, e.start_line, e.start_char, encoding)
        end = _offset(text, starts, e.end_line, e.end_char, encoding)
        if end < begin:
            raise ValueError(f"edit ends before it starts: {e}")
        spans.append((begin, end, order, e.new_text))
    spans.sort()
    out = []
    cursor = 0
    for begin, end, _, new_text in spans:
        if begin < cursor:
            raise ValueError("overlapping edits")
        out.append(text[cursor:begin])
        out.append(new_text)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def unified_diff(old: str, new: str, path: str, context: int = 3, created: bool = False, first_line: int = 0) -> str:
    """A git-style unified diff (with "\\ No newline at end of file" markers); "" when nothing changed. A `created`
    file's diff starts `--- /dev/null` (git's convention), so `git apply` and `patch` create it. `first_line`: the
    0-based line of the file where `old` and `new` start, when they are an excerpt of it (the hunk headers say where
    the lines really are)."""
    if old == new:
        return ""
    t = trim_common_lines(old, new, context)
    a, b = split_lines(old[t.start : t.old_end]), split_lines(new[t.start : t.new_end])
    first_line += t.first_line
    out = [f"--- {'/dev/null' if created else f'a/{path}'}\n", f"+++ b/{path}\n"]
    for group in _groups(line_opcodes(a, b), len(a), context):
        i_start, j_start = group[0][0], group[0][2]
        i_end, j_end = group[-1][1], group[-1][3]
        old_span, new_span = _span(i_start, i_end - i_start, first_line), _span(j_start, j_end - j_start, first_line)
        out.append(f"@@ -{old_span} +{new_span} @@\n")
        for tag, i1, i2, j1, j2 in _tagged(group):
            lines = (
                [(" ", line) for line in a[i1:i2]]
                if tag == "equal"
                else [("-", line) for line in a[i1:i2]] + [("+", line) for line in b[j1:j2]]
            )
            for mark, line in lines:
                out.append(mark + line)
                if line[-1:] not in ("\n", "\r"):
                    out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _span(start: int, length: int, offset: int = 0) -> str:
    # difflib's (and git's) convention: an empty range is shown at the line before it.
    start += offset
    if length == 1:
        return f"{start + 1}"
    return f"{start + 1 if length else start},{length}"


def _groups(
    changes: list[tuple[int, int, int, int]], a_len: int, context: int
) -> list[list[tuple[int, int, int, int]]]:
    """Hunks: equal, change, equal, change, …, equal ranges; changes closer than 2*context share a hunk."""
    groups: list[list[tuple[int, int, int, int]]] = []
    for i1, i2, j1, j2 in changes:
        if groups and i1 - groups[-1][-1][1] <= 2 * context:
            last = groups[-1][-1]
            groups[-1] += [(last[1], i1, last[3], j1), (i1, i2, j1, j2)]
        else:
            lead = min(context, i1)
            groups.append([(i1 - lead, i1, j1 - lead, j1), (i1, i2, j1, j2)])
    for group in groups:
        i2, j2 = group[-1][1], group[-1][3]
        tail = min(context, a_len - i2)
        group.append((i2, i2 + tail, j2, j2 + tail))
    return groups


def _tagged(group: list[tuple[int, int, int, int]]) -> list[tuple[str, int, int, int, int]]:
    """Alternating equal/change ranges of a group (equal runs are the even entries)."""
    out = []
    for n, (i1, i2, j1, j2) in enumerate(group):
        if i1 == i2 and j1 == j2:
            continue
        out.append(("equal" if n % 2 == 0 else "change", i1, i2, j1, j2))
    return out
