"""Issue 25, item 5: an insertion at the end of a file reaches every client as exactly the intended text.

The server used to send it at `(line_count, 0)` with a trailing newline; Neovim (0.7 to 0.11) appends an edit that
starts past its last line with `nvim_buf_set_lines`, so the trailing newline became an extra blank line. The test
applies what the server sent the way Neovim 0.11's `vim.lsp.util.apply_text_edits` does (below), under every
client profile, besides the harness's own (LSP-exact) application."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nagent_lsp.text.document_end import within_lines
from nagent_lsp.text.edits import apply_edits, minimal_edits
from tests.harness.fake_openai import text

ORIGINAL = "def add(a, b):\n    return a + b\n"
ADDED = ORIGINAL + "\n\ndef sub(a, b):\n    return a - b\n"


def neovim_apply(document: str, edits: list[Any]) -> str:
    """What Neovim 0.11's `apply_text_edits` makes of `edits` on a buffer holding `document` ('eol' set when it
    ends with a newline, which is then no line of the buffer). ASCII text: columns are characters."""
    eol = document.endswith("\n")
    lines = document.split("\n")
    if eol:
        lines.pop()
    lines = lines or [""]
    eol_edit = False
    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
    for edit in ordered:
        new = edit.new_text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        start, end = edit.range.start, edit.range.end
        sr, sc, er, ec = start.line, start.character, end.line, end.character
        count = len(lines)
        if count <= sr:  # "the whole edit is after the lines in the buffer": appended as lines
            lines[count:count] = new
            continue
        if count <= er:  # "+1 range of the end of the buffer"
            er, ec, eol_edit = count - 1, len(lines[count - 1]), True
        elif ec > len(lines[er]) and edit.new_text.endswith("\n"):
            new.pop()
        ec = min(ec, len(lines[er]))
        new[0] = lines[sr][:sc] + new[0]
        new[-1] = new[-1] + lines[er][ec:]
        lines[sr : er + 1] = new
    if eol_edit and eol and len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + ("\n" if eol else "")


def sent_edits(editor) -> list[Any]:
    edit = editor.recorded.apply_edits[-1].edit
    if edit.document_changes:
        return list(edit.document_changes[0].edits)
    return list(next(iter(edit.changes.values())))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\n", "a\nb\nc\n"),
        ("a\nb\nc\n", "a\n"),
        ("a\r\nb\r\n", "a\r\nb\r\nc\r\nd\r\n"),
        ("a\n\n", "a\n\nz\n"),
        ("\n", "\nq\n"),
        ("é\n", "é\nq\n"),
        ("a\nb\n", "x\nb\nc\n"),
    ],
)
def test_end_of_file_edits_stay_inside_the_lines(old: str, new: str) -> None:
    line_count = old.count("\n")
    for encoding in ("utf-16", "utf-8", "utf-32"):
        moved = within_lines(old, minimal_edits(old, new, encoding), encoding)
        assert apply_edits(old, moved, encoding) == new
        assert all(e.start_line < line_count and e.end_line < line_count for e in moved), moved


PIECES = st.sampled_from(["a", "b", "\n", "\r\n", "é", "😀"])
TEXT = st.lists(PIECES, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_moved_edits_still_make_the_new_text(old: str, new: str, encoding: str) -> None:
    moved = within_lines(old, minimal_edits(old, new, encoding), encoding)
    assert apply_edits(old, moved, encoding) == new
    keys = [(e.start_line, e.start_char, e.end_line, e.end_char) for e in moved]
    assert keys == sorted(keys)
    for prev, cur in zip(moved, moved[1:], strict=False):
        assert (prev.end_line, prev.end_char) <= (cur.start_line, cur.start_char)


async def test_insertion_at_end_of_file_is_exact_in_every_client(profile, workspace, editors, fake_model) -> None:
    target = workspace / "calc.py"
    target.write_text(ORIGINAL, encoding="utf-8")
    fake_model.script(
        text(f'<nagent-write path="{target}">\n{ADDED}</nagent-write>'),
        text("<nagent-response>added sub</nagent-response>"),
    )
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "add sub"})
        assert result["applied"] is True, result
        assert editor.text(target) == ADDED
        edits = sent_edits(editor)
    assert all(e.range.start.line < ORIGINAL.count("\n") for e in edits), edits  # no edit past the last line
    assert neovim_apply(ORIGINAL, edits) == ADDED


async def test_end_of_file_hunk_is_reviewed_on_the_last_line(profile, workspace, editors, fake_model) -> None:
    """Issue 25, item 8: the zero-plugin hint of a hunk added at the end of a file, and its accept/reject actions,
    are on the file's last line, not past its final newline (where Neovim and eglot put no cursor)."""
    from tests.test_changeset import _actions, published, run_action

    target = workspace / "calc.py"
    target.write_text(ORIGINAL, encoding="utf-8")
    fake_model.script(
        text(f'<nagent-write path="{target}">\n{ADDED}</nagent-write>'),
        text("<nagent-response>added sub</nagent-response>"),
    )
    last = ORIGINAL.count("\n") - 1
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        request = {"uri": uri, "request": "add sub", "preview": True}
        result = await editor.command("nagent.edit", request)
        assert result["proposal"]["id"], result
        (diag,) = await published(editor, uri, lambda d: len(d) == 1)
        assert diag.range.start.line == last and diag.range.end.line == last, diag.range
        titles = [a.title for a in await _actions(editor, target, last)]
        assert any("accept this change" in t for t in titles) and any("reject this change" in t for t in titles)
        accept = next(a for a in await _actions(editor, target, last) if "accept this" in a.title)
        applied = await run_action(editor, accept)
        assert applied["applied"] is True and editor.text(target) == ADDED
        assert neovim_apply(ORIGINAL, sent_edits(editor)) == ADDED
