"""Old text + new text -> minimal edits, in an LSP position encoding; plus apply, unified diff and 3-way merge.

Pure: no editor, no disk. Lines follow LSP rules (\\r\\n, \\r and \\n each end a line; other Unicode breaks do
not). Edits never start or end between the \\r and \\n of a CRLF pair, so every position is unambiguous.
"""

from __future__ import annotations

import difflib
import re
from bisect import bisect_right
from dataclasses import dataclass

ENCODINGS = ("utf-16", "utf-8", "utf-32")

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_BREAK_RE = re.compile(r"\r\n|\r|\n")


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


def _position(text: str, starts: list[int], offset: int, encoding: str) -> tuple[int, int]:
    line = bisect_right(starts, offset) - 1
    return line, _units(text[starts[line] : offset], encoding)


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


def _line_opcodes(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
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
    # autojunk would hide frequent lines (blank lines, braces) and give larger, uglier hunks on small inputs.
    matcher = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=len(a_mid) + len(b_mid) > 20000)
    return [
        (i1 + head, i2 + head, j1 + head, j2 + head)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _hunks(old: str, new: str) -> list[tuple[int, int, str]]:
    """(old start offset, old end offset, replacement) for each changed region, trimmed to characters."""
    a, b = split_lines(old), split_lines(new)
    a_starts = [0]
    for line in a:
        a_starts.append(a_starts[-1] + len(line))
    b_starts = [0]
    for line in b:
        b_starts.append(b_starts[-1] + len(line))
    out = []
    for i1, i2, j1, j2 in _line_opcodes(a, b):
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
        out.append((start, end, replacement))
    return out


def minimal_edits(old: str, new: str, encoding: str = "utf-16") -> list[TextEditSpec]:
    """Edits, in document order and non-overlapping, that turn `old` into `new` (positions refer to `old`)."""
    _units("", encoding)
    if old == new:
        return []
    starts = _line_starts(old)
    edits = []
    for begin, end, replacement in _hunks(old, new):
        sl, sc = _position(old, starts, begin, encoding)
        el, ec = _position(old, starts, end, encoding)
        edits.append(TextEditSpec(sl, sc, el, ec, replacement))
    return edits


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


def unified_diff(old: str, new: str, path: str, context: int = 3) -> str:
    """A git-style unified diff (with "\\ No newline at end of file" markers); "" when nothing changed."""
    if old == new:
        return ""
    a, b = split_lines(old), split_lines(new)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=context, lineterm="\n"):
        out.append(line)
        if line[-1:] not in ("\n", "\r"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _side_hunks(base: list[str], other: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
    return [(i1, i2, tuple(other[j1:j2])) for i1, i2, j1, j2 in _line_opcodes(base, other)]


def _clash(x: tuple[int, int, tuple[str, ...]], y: tuple[int, int, tuple[str, ...]]) -> bool:
    (s1, e1, _), (s2, e2, _) = x, y
    if max(s1, s2) < min(e1, e2):
        return True
    # An insertion touching the other side's change has no well-defined order: call it a conflict.
    if s1 == e1 and s2 <= s1 <= e2:
        return True
    if s2 == e2 and s1 <= s2 <= e1:
        return True
    return False


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """Line-based three-way merge; None when both sides changed the same or touching lines differently."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    b = split_lines(base)
    mine = _side_hunks(b, split_lines(ours))
    other = [h for h in _side_hunks(b, split_lines(theirs)) if h not in set(mine)]
    for x in mine:
        for y in other:
            if _clash(x, y):
                return None
    out = []
    cursor = 0
    for start, end, lines in sorted(mine + other, key=lambda h: (h[0], h[1])):
        out.extend(b[cursor:start])
        out.extend(lines)
        cursor = end
    out.extend(b[cursor:])
    merged = "".join(out)
    return merged
