"""Whole-text diffs run on the changed middle only (issue 29): cutting the common head and tail at line boundaries
changes no result. Each property compares with the same function with the trimming switched off (the identity
cut, which is what every diff did before), on texts with every kind of line break, with tiny comparison blocks so
the block-by-block scan crosses block edges."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nagent_lsp.text.edits as edits_module
import nagent_lsp.text.merge as merge_module
from nagent_lsp.text.edits import Trimmed, minimal_edits, trim_common_lines, unified_diff
from nagent_lsp.text.merge import line_hunks

from .test_textedit import ENCODINGS, old_and_new


def _untrimmed(old: str, new: str, context: int = 0) -> Trimmed:
    return Trimmed(0, len(old), len(new), 0)


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(edits_module, "_BLOCK", 3)


def _without_trimming(fn, *args, **kwargs):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(edits_module, "trim_common_lines", _untrimmed)
        mp.setattr(merge_module, "trim_common_lines", _untrimmed)
        return fn(*args, **kwargs)


@settings(max_examples=400, deadline=None)
@given(old_and_new(), st.sampled_from(ENCODINGS), st.sampled_from([1, 3, 1 << 20]))
def test_trimmed_diffs_equal_whole_text_diffs(pair, encoding, block):
    old, new = pair
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(edits_module, "_BLOCK", block)
        assert minimal_edits(old, new, encoding) == _without_trimming(minimal_edits, old, new, encoding)
        for context in (0, 1, 3):
            assert unified_diff(old, new, "f", context=context) == _without_trimming(
                unified_diff, old, new, "f", context=context
            )
        assert line_hunks(old, new) == _without_trimming(line_hunks, old, new)


@settings(max_examples=300, deadline=None)
@given(old_and_new(), st.integers(0, 3))
def test_the_cut_is_a_line_start_in_both_texts(pair, context):
    old, new = pair
    t = trim_common_lines(old, new, context)
    assert old[: t.start] == new[: t.start]
    assert old[t.old_end :] == new[t.new_end :]
    assert t.start <= t.old_end and t.start <= t.new_end
    for text, end in ((old, t.old_end), (new, t.new_end)):
        for cut in (t.start, end):
            assert cut in (0, len(text)) or text[cut - 1] in "\r\n"
            assert not (0 < cut < len(text) and text[cut - 1] == "\r" and text[cut] == "\n")


def test_a_one_line_change_in_a_large_text_diffs_only_its_middle():
    lines = [f"line {i}\n" for i in range(200_000)]
    old = "".join(lines)
    lines[100_000] = "changed\n"
    new = "".join(lines)
    t = trim_common_lines(old, new)
    assert old[t.start : t.old_end] == "line 100000\n" and new[t.start : t.new_end] == "changed\n"
    assert t.first_line == 100_000
    (edit,) = minimal_edits(old, new)
    assert (edit.start_line, edit.end_line) == (100_000, 100_000)
    assert unified_diff(old, new, "f").splitlines()[2] == "@@ -99998,7 +99998,7 @@"
