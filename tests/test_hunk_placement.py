"""Where a proposal's hunks are in a text the user changed since (`text.merge.place_hunks`): what
`nagent.review.show` reports and the zero-plugin diagnostics show."""

from __future__ import annotations

from nagent_lsp.text.merge import HunkConflict, LineHunk, Placed, line_hunks, merge_hunks, place_hunks

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
    # The first hunk's own line, and both lines around the insertion.
    typed = BASE.replace("v2 = 2", "v2 = 22").replace("v7 = 7", "v7 = 77").replace("v8 = 8", "v8 = 88")
    # Not found: each is shown where its lines were (the insertion at the start of the region that replaced them).
    assert place_hunks(BASE, typed, hunks) == [Placed(2, 3, False), Placed(7, 7, False)]


def test_an_insertion_next_to_a_changed_line_still_applies() -> None:
    (insertion,) = hunks_of(BASE.replace("v7 = 7\n", "v7 = 7\nextra = 1\n"))
    after_changed = BASE.replace("v8 = 8", "v8 = 88")  # the line after the insertion changed: it goes before it
    assert place_hunks(BASE, after_changed, [insertion]) == [Placed(8, 8, True)]
    before_changed = "# header\n" + BASE.replace("v7 = 7", "v7 = 77")  # the line before: it goes after it
    assert place_hunks(BASE, before_changed, [insertion]) == [Placed(9, 9, True)]


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


FORTY = "".join(f"line{i} = {i}\n" for i in range(1, 41))


def test_changes_on_adjacent_lines_both_merge() -> None:
    """Two proposals made against the same text, on lines 20 and 21: merge3 alone calls that a conflict."""
    (first,) = line_hunks(FORTY, FORTY.replace("line20 = 20", "line20 = 'twenty'"))
    (second,) = line_hunks(FORTY, FORTY.replace("line21 = 21", "line21 = 'twenty-one'"))
    after_first, failed = merge_hunks(FORTY, FORTY, [first])
    assert failed == []
    both, failed = merge_hunks(FORTY, after_first, [second])
    assert failed == []
    assert both == FORTY.replace("line20 = 20", "line20 = 'twenty'").replace("line21 = 21", "line21 = 'twenty-one'")


def test_a_conflict_says_which_lines_changed() -> None:
    (hunk,) = line_hunks(FORTY, FORTY.replace("line21 = 21", "line21 = 'proposed'"))
    users = FORTY.replace("line21 = 21", "line21 = 'the user'")
    text, failed = merge_hunks(FORTY, users, [hunk])
    assert text == users and failed == [HunkConflict(0, (21, 21))]
    assert failed[0].why("h2") == (
        "the lines of h2 changed since the proposal was made (another change touched lines 21-21)"
    )


def test_a_lone_repeated_line_the_user_changed_is_never_applied_elsewhere() -> None:
    base = "".join(f"f{i} {{\n}}\n" for i in range(6))
    (hunk,) = line_hunks(base, base.replace("f2 {\n}\n", "f2 {\n};\n"))
    users = base.replace("f2 {\n}\n", "f2 {\n} // end of f2\n")
    text, failed = merge_hunks(base, users, [hunk])
    assert text == users and [c.index for c in failed] == [0]
