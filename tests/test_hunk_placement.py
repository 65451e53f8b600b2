"""Where a proposal's hunks are in a text the user changed since (`text.merge.place_hunks`): what
`nagent.review.show` reports and the zero-plugin diagnostics show."""

from __future__ import annotations

from nagent_lsp.text.merge import LineHunk, Placed, line_hunks, place_hunks

BASE = "".join(f"v{i} = {i}\n" for i in range(10))


def hunks_of(new: str) -> list[LineHunk]:
    return line_hunks(BASE, new)


def test_hunks_move_with_their_lines() -> None:
    hunks = hunks_of(BASE.replace("v2 = 2", "v2 = 'two'").replace("v7 = 7\n", "v7 = 7\nextra = 1\n"))
    assert [(h.start, h.end) for h in hunks] == [(2, 3), (8, 8)]  # a change, an insertion after v7
    assert place_hunks(BASE, BASE, hunks) == [Placed(2, 3, True), Placed(8, 8, True)]
    typed = "# header\n" + BASE.replace("v5 = 5\n", "v5 = 5\nmore = 2\nmore = 3\n")
    assert place_hunks(BASE, typed, hunks) == [Placed(3, 4, True), Placed(11, 11, True)]


def test_a_hunk_whose_lines_changed_no_longer_applies() -> None:
    hunks = hunks_of(BASE.replace("v2 = 2", "v2 = 'two'").replace("v7 = 7\n", "v7 = 7\nextra = 1\n"))
    typed = BASE.replace("v2 = 2", "v2 = 22").replace(
        "v8 = 8", "v8 = 88"
    )  # both hunks' lines (v8: next to the insertion)
    assert place_hunks(BASE, typed, hunks) == [Placed(2, 3, False), Placed(8, 8, False)]


def test_repeated_lines_take_the_nearest() -> None:
    base = "x\n" * 6
    (hunk,) = line_hunks(base, "x\nx\nx\ny\nx\nx\n")
    assert (hunk.start, hunk.end) == (3, 4)
    assert place_hunks(base, "x\n" * 8, [hunk]) == [Placed(3, 4, True)]


def test_a_new_file_and_a_deleted_text() -> None:
    (hunk,) = line_hunks("", "new = 1\n")
    assert place_hunks("", "", [hunk]) == [Placed(0, 0, True)]
    (gone,) = line_hunks(BASE, "")
    assert place_hunks(BASE, "", [gone]) == [Placed(0, 0, False)]
