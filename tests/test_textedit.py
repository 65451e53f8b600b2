"""textedit: minimal edits round-trip in every encoding, CRLF and astral safe; diff; three-way merge."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nagent_lsp.text.edits as textedit_module
from nagent_lsp.text.edits import (
    TextEditSpec,
    apply_edits,
    minimal_edits,
    split_lines,
    unified_diff,
)
from nagent_lsp.text.merge import merge3

ENCODINGS = ["utf-16", "utf-8", "utf-32"]

# Small alphabet so random texts share lines and produce interesting diffs; includes line breaks of every
# kind, a BMP non-ASCII letter, an astral emoji and a Unicode line separator (not a break in LSP).
PIECES = st.sampled_from(["a", "b", "x", " ", "\n", "\r\n", "\r", "é", "😀", "\u2028", "𝄞"])
TEXT = st.lists(PIECES, max_size=40).map("".join)


@st.composite
def old_and_new(draw):
    old = draw(TEXT)
    if draw(st.booleans()):
        return old, draw(TEXT)
    # Mutate a few spots of `old`, like a model edit would.
    chars = list(old)
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(chars)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(PIECES)
        if kind == "insert" or not chars:
            chars.insert(pos, piece)
        elif kind == "delete":
            del chars[min(pos, len(chars) - 1)]
        else:
            chars[min(pos, len(chars) - 1)] = piece
    return old, "".join(chars)


@settings(max_examples=300, deadline=None)
@given(old_and_new(), st.sampled_from(ENCODINGS))
def test_minimal_edits_turn_old_into_new(pair, encoding):
    old, new = pair
    edits = minimal_edits(old, new, encoding)
    assert apply_edits(old, edits, encoding) == new
    # Document order, non-overlapping: what clients require of one TextEdit[].
    keys = [(e.start_line, e.start_char, e.end_line, e.end_char) for e in edits]
    assert keys == sorted(keys)
    for prev, cur in zip(edits, edits[1:], strict=False):
        assert (prev.end_line, prev.end_char) <= (cur.start_line, cur.start_char)


def test_identical_text_gives_no_edits():
    assert minimal_edits("same\r\n", "same\r\n") == []


def test_one_word_change_in_a_big_file_is_one_small_edit():
    lines = [f"line {i} of the file\n" for i in range(5000)]
    old = "".join(lines)
    lines[2500] = "line 2500 OF the file\n"
    new = "".join(lines)
    edits = minimal_edits(old, new)
    assert edits == [TextEditSpec(2500, 10, 2500, 12, "OF")]


def test_positions_count_utf16_units_for_astral_characters():
    old = "😀é=1\n"
    new = "😀é=2\n"
    assert minimal_edits(old, new, "utf-16") == [TextEditSpec(0, 4, 0, 5, "2")]
    assert minimal_edits(old, new, "utf-8") == [TextEditSpec(0, 7, 0, 8, "2")]
    assert minimal_edits(old, new, "utf-32") == [TextEditSpec(0, 3, 0, 4, "2")]


def test_crlf_pair_is_never_split():
    # LF -> CRLF conversion of one line: the edit replaces the whole break, not half of it.
    edits = minimal_edits("a\nb\n", "a\r\nb\n")
    assert apply_edits("a\nb\n", edits) == "a\r\nb\n"
    for e in minimal_edits("a\r\nb", "a\rX\nb") + minimal_edits("a\r\nb", "a\nb"):
        assert e.start_char <= 1 or e.start_line > 0


def test_lone_cr_and_unicode_separators_follow_lsp_line_rules():
    # \r alone ends a line; U+2028 does not (str.splitlines would disagree).
    assert split_lines("a\rb\u2028c\r\nd") == ["a\r", "b\u2028c\r\n", "d"]
    assert minimal_edits("a\rb\u2028c", "a\rb\u2028C") == [TextEditSpec(1, 2, 1, 3, "C")]


def test_apply_edits_rejects_overlaps_and_bad_encoding():
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", [TextEditSpec(0, 0, 0, 3, "x"), TextEditSpec(0, 2, 0, 4, "y")])
    with pytest.raises(ValueError, match="unsupported position encoding"):
        minimal_edits("a", "b", "latin-1")
    with pytest.raises(ValueError, match="splits a character"):
        apply_edits("😀", [TextEditSpec(0, 1, 0, 1, "x")], "utf-16")


def test_apply_edits_clamps_positions_past_the_end_like_lsp():
    assert apply_edits("ab\ncd", [TextEditSpec(0, 99, 7, 0, "!")]) == "ab!"


def _apply_unified(old: str, diff: str) -> str:
    """A tiny hunk applier, enough to prove the diff carries the whole change."""
    src = split_lines(old)
    out: list[str] = []
    pos = 0
    lines = split_lines(diff)
    i = 2  # skip ---/+++ headers
    while i < len(lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", lines[i])
        assert m, lines[i]
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out.extend(src[pos:start])
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][0], lines[i][1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\ No newline"):
                body = body.rstrip("\n")
                i += 1
            if tag in " -":
                assert src[pos] == body
                pos += 1
            if tag in " +":
                out.append(body)
            i += 1
    out.extend(src[pos:])
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(old_and_new())
def test_unified_diff_carries_the_change(pair):
    old, new = pair
    # The tiny applier reads the diff by lines, so keep it to LF text here; CRLF has its own test.
    old, new = old.replace("\r", ""), new.replace("\r", "")
    diff = unified_diff(old, new, "src/x.py")
    if old == new:
        assert diff == ""
        return
    assert diff.startswith("--- a/src/x.py\n+++ b/src/x.py\n")
    assert _apply_unified(old, diff) == new


def test_unified_diff_marks_missing_final_newline_and_keeps_crlf():
    diff = unified_diff("a\r\nb", "a\r\nc", "f.txt")
    assert "-b\n\\ No newline at end of file\n" in diff
    assert "+c\n\\ No newline at end of file\n" in diff
    assert " a\r\n" in diff


BASE = "".join(f"line {i}\n" for i in range(20))


def _change(text: str, index: int, new: str) -> str:
    lines = split_lines(text)
    lines[index] = new
    return "".join(lines)


def test_merge3_combines_changes_to_different_lines():
    ours = _change(BASE, 3, "ours 3\n")
    theirs = _change(BASE, 15, "theirs 15\n")
    merged = merge3(BASE, ours, theirs)
    assert merged == _change(ours, 15, "theirs 15\n")


def test_merge3_conflict_on_the_same_line_and_agreement_on_identical_changes():
    assert merge3(BASE, _change(BASE, 5, "A\n"), _change(BASE, 5, "B\n")) is None
    same = _change(BASE, 5, "A\n")
    assert merge3(BASE, same, _change(same, 10, "C\n")) == _change(same, 10, "C\n")


def test_merge3_insertion_touching_a_change_is_a_conflict():
    lines = split_lines(BASE)
    theirs = "".join(lines[:5] + ["inserted\n"] + lines[5:])
    assert merge3(BASE, _change(BASE, 5, "changed\n"), theirs) is None


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 19), st.integers(0, 19), st.text(alphabet="xyz😀é", max_size=5))
def test_merge3_of_separated_edits_contains_both(i, j, word):
    if abs(i - j) < 2:
        return
    ours = _change(BASE, i, f"ours{word}\n")
    theirs = _change(BASE, j, f"theirs{word}\n")
    assert merge3(BASE, ours, theirs) == _change(ours, j, f"theirs{word}\n")
    assert merge3(BASE, ours, BASE) == ours
    assert merge3(BASE, BASE, theirs) == theirs


@given(
    st.lists(st.sampled_from(["a\n", "b\n", "\n", "}\n", "x = 1\n", "é😀\n", "c\r\n"]), max_size=60),
    st.lists(st.sampled_from(["a\n", "b\n", "\n", "}\n", "y = 2\n", "é😀\n", "c\r\n"]), max_size=60),
)
@settings(max_examples=150, deadline=None)
def test_anchored_diff_on_repetitive_text_is_exact(old_lines, new_lines) -> None:
    # Force the patience-anchored path (normally only for files over SMALL_GAP lines).
    old, new = "".join(old_lines), "".join(new_lines)
    saved, textedit_module.SMALL_GAP = textedit_module.SMALL_GAP, 2
    try:
        for encoding in ("utf-16", "utf-32"):
            assert apply_edits(old, minimal_edits(old, new, encoding), encoding) == new
    finally:
        textedit_module.SMALL_GAP = saved


def test_large_file_with_few_changes_gives_few_hunks() -> None:
    old = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(20000))
    new = old.replace("return 100\n", "return 'a'\n").replace("return 15000\n", "return 'b'\n")
    edits = minimal_edits(old, new)
    assert len(edits) == 2
    assert apply_edits(old, edits) == new


@pytest.mark.parametrize("brk", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_split_lines_keeps_every_break_lsp_does_not_know_inside_its_line(brk: str) -> None:
    # split_lines takes str.splitlines' fast path only for texts without these; each must still stay inside a line.
    assert split_lines(f"a{brk}b\nc{brk}\r\nd") == [f"a{brk}b\n", f"c{brk}\r\n", "d"]
