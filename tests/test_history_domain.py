"""Pure history/co-edit domain: log parsing, the rename-following index (pool, views, segments), co-edit levels,
blame, refs, render, the index file's framing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagent_lsp.history.blame import (
    advance,
    compact,
    decode,
    encode,
    parse_hunks,
    parse_porcelain,
)
from nagent_lsp.history.coedits import CoeditTable, coedit_table, level
from nagent_lsp.history.encoding import display, git_arg, to_bytes
from nagent_lsp.history.ignore_revs import is_ignored, parse_ignore_revs
from nagent_lsp.history.index import HASH, IndexBuilder, Marks, RepoIndex, View, raw_commits, release
from nagent_lsp.history.logparse import RawCommit, parse_log
from nagent_lsp.history.refs import read_head
from nagent_lsp.history.render import HistoryView, authors_of, file_history_block, hover_card
from nagent_lsp.store import history_index as index_file

H = [f"{i:040x}" for i in range(1, 60)]


def raw(i: int, changes, author=b"Ann", email=b"ann@x", parents=None, subject=None) -> RawCommit:
    """Commit H[i]; its parent is H[i-1] unless `parents` says otherwise. Paths may be given as str."""
    if parents is None:
        parents = (H[i - 1],) if i > 0 else ()
    fixed = tuple(
        (s, p.encode() if isinstance(p, str) else p, o.encode() if isinstance(o, str) else o) for s, p, o in changes
    )
    text = subject if subject is not None else f"subject {i}".encode()
    return RawCommit(H[i], tuple(parents), author, email, 1_700_000_000 + i * 86400, text, fixed)


def record(
    sha: str, changes: list[bytes], parents: str = "p", subject: bytes = b"msg", author: bytes = b"Ann"
) -> bytes:
    head = b"\x01" + sha.encode() + b"\x1f" + parents.encode() + b"\x1f" + author + b"\x1fann@x\x1f1700000000\x1f"
    head += subject + b"\0"
    return head + (b"\n" + b"\0".join(changes) + b"\0" if changes else b"")


def hashes(lineage) -> list[str]:
    return [c.hash for c in lineage.commits]


def test_parse_log_handles_renames_odd_names_merges_and_chunk_boundaries() -> None:
    stream = (
        record(H[0], [b"R100", b"old name.txt", b"new\tname.txt", b"M", b"caf\xc3\xa9.py"])
        + record(H[1], [], parents="a b", subject=b"Merge x")
        + record(H[2], [b"A", b"a", b"D", b"b", b"C75", b"src", b"copy"])
        + record(H[3], [b"M", b"bad\xff\xfename.c"], subject=b"caf\xe9 \xff", author=b"David K\xe5gedal")
    )
    # split into 7-byte chunks so records and fields straddle chunk boundaries
    commits = list(parse_log(stream[i : i + 7] for i in range(0, len(stream), 7)))
    assert [c.hash for c in commits] == [H[0], H[1], H[2], H[3]]
    assert commits[0].changes == (("R", b"new\tname.txt", b"old name.txt"), ("M", "café.py".encode(), None))
    assert commits[1].parents == ("a", "b") and commits[1].changes == ()
    assert commits[2].changes == (("A", b"a", None), ("D", b"b", None), ("C", b"copy", b"src"))
    assert commits[0].author == b"Ann" and commits[0].time == 1700000000
    # git's bytes, exactly: nothing decoded, nothing lost
    assert commits[3].author == b"David K\xe5gedal" and commits[3].subject == b"caf\xe9 \xff"
    assert commits[3].changes == (("M", b"bad\xff\xfename.c", None),)


def test_display_is_utf8_with_latin1_for_stray_bytes_and_paths_round_trip() -> None:
    assert display(b"David K\xe5gedal") == "David Kågedal"
    assert display("Jörg".encode()) == "Jörg"  # valid UTF-8 stays as it is
    assert display("Jörg ".encode() + b"\xe9") == "Jörg é"  # a stray byte next to UTF-8 spoils nothing
    for raw_bytes in (b"\xff\xfe\x80", b"a\xc3", bytes(range(256))):
        text = display(raw_bytes)
        text.encode("utf-8")  # always valid Unicode: a JSON result never raises
        json.dumps(text, ensure_ascii=False).encode("utf-8")
    path = b"dir/caf\xe9-\xff.c"
    assert to_bytes(git_arg(path)) == path  # file system / command line round trip


def build(commits: list[RawCommit], head: str | None = None) -> RepoIndex:
    index = RepoIndex()
    index.extend_newest_first(list(reversed(commits)))
    index.checkout(View(head or commits[-1].hash, None, len(index)))
    return index


def test_lineage_follows_renames_and_a_reused_name_does_not_leak() -> None:
    index = build(
        [
            raw(0, [("A", "b.py", None), ("A", "x.py", None)]),
            raw(1, [("M", "b.py", None)]),
            raw(2, [("R", "c.py", "b.py")]),  # b -> c
            raw(3, [("A", "a.py", None)]),
            raw(4, [("M", "a.py", None), ("M", "x.py", None)]),
            raw(5, [("R", "b.py", "a.py")]),  # a -> b: the name b.py is reused
            raw(6, [("M", "b.py", None), ("M", "c.py", None)]),
        ]
    )
    lin = index.lineage(b"b.py")
    assert hashes(lin) == [H[6], H[5], H[4], H[3]]
    assert [c.path for c in lin.commits] == ["b.py", "b.py", "a.py", "a.py"]
    assert [c.raw_path for c in lin.commits] == [b"b.py", b"b.py", b"a.py", b"a.py"]
    assert lin.names == {b"b.py", b"a.py"} and lin.complete
    assert hashes(index.lineage(b"c.py")) == [H[6], H[2], H[1], H[0]]
    # a limit never claims completeness when older commits remain, even across a rename boundary
    assert [len(index.lineage(b"c.py", limit=k).commits) for k in (2, 3, 4, 5)] == [2, 3, 4, 4]
    assert [index.lineage(b"c.py", limit=k).complete for k in (2, 3, 4, 5)] == [False, False, True, True]
    # a partner seen under an old name is reported under the name it has now
    assert index.paths[index.canonical(index.path_ids[b"a.py"], 4)] == b"b.py"
    assert index.paths[index.canonical(index.path_ids[b"b.py"], 1)] == b"c.py"
    assert index.paths[index.canonical(index.path_ids[b"b.py"], 6)] == b"b.py"
    assert index.is_dead(index.path_ids[b"a.py"]) and not index.is_dead(index.path_ids[b"b.py"])


def test_non_utf8_names_and_paths_are_kept_as_bytes_and_shown_readably() -> None:
    odd = b"r\xe9sum\xe9.txt"
    index = build(
        [
            raw(0, [("A", odd, None), ("A", "f.py", None)], author=b"David K\xe5gedal", subject=b"caf\xe9 \xff\xfe"),
            raw(1, [("M", "f.py", None), ("M", odd, None)]),
        ]
    )
    lin = index.lineage(odd)
    assert hashes(lin) == [H[1], H[0]] and lin.commits[0].raw_path == odd
    assert lin.commits[1].author == "David Kågedal" and lin.commits[1].subject == "café ÿþ"
    assert lin.commits[0].path == "résumé.txt"
    again = RepoIndex.decode([RepoIndex.header(), index.encode_segment()])
    assert again.paths == index.paths and again.people == index.people and again.lineage(odd) == lin


def test_segments_round_trip_and_append_instead_of_rewriting() -> None:
    first = [raw(0, [("A", "a", None), ("A", "b", None)]), raw(1, [("R", "c", "a")]), raw(2, [("D", "b", None)])]
    index = build(first)
    frames = [RepoIndex.header(), index.encode_segment()]
    marks = index.marks()
    assert marks == Marks(3, 3, 1)
    # one more commit: the next segment holds only it (and the new HEAD), not the history again
    index.extend_newest_first([raw(3, [("M", "c", None), ("A", "n\xe9w".encode("latin-1"), None)], author=b"Bob")])
    index.checkout(index.view_for(H[3]))
    segment = index.encode_segment(marks)
    assert len(segment) < len(frames[1])
    frames.append(segment)
    again = RepoIndex.decode(frames)
    assert again.head == H[3] and again.hashes == index.hashes and bytes(again.ch_pid) == bytes(index.ch_pid)
    assert again.lineage(b"c") == index.lineage(b"c")
    assert hashes(again.lineage(b"c")) == [H[3], H[1], H[0]]
    assert again.is_dead(again.path_ids[b"a"]) and again.is_dead(again.path_ids[b"b"])
    # a HEAD move to a commit the index has: a segment with no commits, only the new HEAD
    index.checkout(index.view_for(H[1]))
    moved = RepoIndex.decode([*frames, index.encode_segment(index.marks())])
    assert moved.head == H[1] and hashes(moved.lineage(b"c")) == [H[1], H[0]] and len(moved) == 4
    assert again.extend_newest_first([raw(4, [("M", "c", None)]), raw(3, [])]) == 1  # a known commit is skipped
    # out of order, truncated or foreign data is refused (the caller rebuilds), never half-loaded
    with pytest.raises(ValueError):
        RepoIndex.decode([RepoIndex.header(), segment])
    with pytest.raises(ValueError):
        RepoIndex.decode([RepoIndex.header(), frames[1][:-3]])
    with pytest.raises(ValueError):
        RepoIndex.decode([b'{"format": "something else"}', frames[1]])


def _tampered(change) -> bytes:
    """A whole segment, every length right, with one id inside it wrong (what `change(index)` does)."""
    index = build(
        [
            raw(0, [("A", "a", None), ("A", "b", None)]),
            raw(1, [("R", "c", "a")], author=b"Bob"),
            raw(2, [("D", "b", None), ("M", "c", None)]),
            raw(3, [("M", "c", None)]),
        ]
    )
    change(index)
    return index.encode_segment()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda i: i.ch_pid.__setitem__(0, 99), id="unknown path"),
        pytest.param(lambda i: i.author.__setitem__(2, 7), id="unknown person"),
        pytest.param(lambda i: i.parent1.__setitem__(1, 3), id="parent after its child"),
        pytest.param(lambda i: i.parent2.__setitem__(2, -5), id="negative parent"),
        pytest.param(lambda i: i.subj_off.__setitem__(2, 0), id="subject offsets go backwards"),
        pytest.param(lambda i: i.ch_off.__setitem__(2, 1), id="change offsets go backwards"),
        pytest.param(lambda i: i.by_path._values.reverse(), id="per-path list descending"),
        pytest.param(lambda i: i.by_path._values.__setitem__(0, 40), id="per-path list past the pool"),
        pytest.param(lambda i: i._lookup.ids.__setitem__(0, 9), id="hash lookup past the pool"),
        pytest.param(lambda i: i._lookup.keys.__setitem__(0, 1 << 63), id="hash prefixes unsorted"),
    ],
)
def test_a_segment_with_a_wrong_id_is_refused(change) -> None:
    """The index file is untrusted (a stranger's repository may hold the state root): every length is checked while
    it is read, every id by `validate` (which the server runs right after a fast load, and drops the index on)."""
    segment = _tampered(change)
    with pytest.raises(ValueError):
        RepoIndex.decode([RepoIndex.header(), segment])
    loaded = RepoIndex.decode([RepoIndex.header(), segment], check=False)  # lengths are right: it loads
    with pytest.raises(ValueError):
        loaded.validate()


def test_a_whole_segment_keeps_its_view_and_an_old_format_is_refused() -> None:
    c = [raw(0, [("A", "f", None)]), raw(1, [("M", "f", None)]), raw(2, [("M", "f", None)], parents=[H[0]])]
    index = build(c)
    index.checkout(index.view_for(H[1]))  # a view that is not "every commit": its mask is written with it
    frames = [RepoIndex.header(), index.encode_segment()]
    again = RepoIndex.decode(frames)
    assert again.head == H[1] and again.view.count == 2 and not again.view.has(again.lookup(H[2]))
    moved = RepoIndex.decode([*frames, _moved_to(again, H[2])])  # a later HEAD is painted from that view
    assert moved.head == H[2] and hashes(moved.lineage(b"f")) == [H[2], H[0]]
    old = json.dumps({"format": "nagent-history-index", "version": 2, "byteorder": "little"}).encode()
    with pytest.raises(ValueError, match="version"):
        RepoIndex.decode([old, frames[1]])


def _moved_to(index: RepoIndex, head: str) -> bytes:
    marks = index.marks()
    view = index.view_for(head)
    assert view is not None
    index.checkout(view)
    return index.encode_segment(marks)


def test_index_file_is_written_from_parts_and_read_as_views(tmp_path: Path) -> None:
    path = tmp_path / "history.idx"
    size = index_file.write_frames(path, [b"header", [b"on", memoryview(b"e")], [bytearray(b"tw"), b"o"]])
    frames, end = index_file.map_frames(path)
    assert [bytes(f) for f in frames] == [b"header", b"one", b"two"] and end == size == path.stat().st_size
    assert index_file.read_frames(path) == ([b"header", b"one", b"two"], size)
    index = build([raw(0, [("A", "f", None)]), raw(1, [("M", "f", None)])])
    parts = index.segment_parts()
    index_file.write_frames(path, [RepoIndex.header(), parts])
    with pytest.raises(BufferError):  # the parts are views of the columns: they pin them until released
        index.parent1.append(0)
    release(parts)
    index.parent1.append(0)
    del index.parent1[-1]
    frames, _ = index_file.map_frames(path)
    assert RepoIndex.decode(frames).lineage(b"f") == index.lineage(b"f")


def test_ids_are_topological_even_when_git_shows_a_parent_first() -> None:
    # clock skew: git's date order can show a parent before one of its children
    stream = (
        record(H[3], [b"M", b"f"], parents=f"{H[1]} {H[2]}")
        + record(H[1], [b"M", b"f"], parents=H[0])  # shown before its child H[2]
        + record(H[2], [b"M", b"g"], parents=H[1])
        + record(H[0], [b"A", b"f", b"A", b"g"], parents="")
    )
    builder = IndexBuilder()
    builder.feed([stream])
    builder.finish()
    index = builder.index
    assert all(p < c for c in range(len(index)) for p in index.parents_of(c))
    assert [index.hash_of(c) for c in range(4)] == [H[0], H[1], H[2], H[3]]
    assert index.is_merge(index.lookup(H[3]))


def test_views_repaint_amend_switch_and_back_without_git() -> None:
    """main: 0-1-2-3; topic from 1: 4-5; amend of 3 as 6. Each view sees its own commits only."""
    c = [
        raw(0, [("A", "f", None), ("A", "g", None)]),
        raw(1, [("M", "f", None)]),
        raw(2, [("M", "f", None), ("M", "g", None)]),
        raw(3, [("M", "f", None), ("M", "g", None)]),
        raw(4, [("M", "f", None), ("R", "h", "g")], parents=[H[1]]),
        raw(5, [("M", "h", None)]),
    ]
    index = build(c[:4])
    main = index.view
    index.extend_newest_first(list(reversed(c[4:])))  # the topic branch arrives (e.g. `git checkout topic`)
    topic = index.view_for(H[5])
    assert topic is not None and topic.count == 4
    index.checkout(topic)
    assert hashes(index.lineage(b"f")) == [H[4], H[1], H[0]]  # not main's 2 and 3
    assert hashes(index.lineage(b"h")) == [H[5], H[4], H[0]]  # renamed from g on this branch (not main's 2)
    assert not index.is_dead(index.path_ids[b"g"], main) and index.is_dead(index.path_ids[b"g"], topic)
    back = index.view_for(H[3])
    assert back is main  # the view of a recent HEAD is kept
    assert hashes(index.lineage(b"f", view=back)) == [H[3], H[2], H[1], H[0]]
    assert not index.is_dead(index.path_ids[b"g"], back)
    # amend 3 -> 6 (parent 2): only the new commit is added; the view drops 3 and takes 6
    index.checkout(back)
    index.extend_newest_first([raw(6, [("M", "f", None)], parents=[H[2]])])
    amended = index.view_for(H[6])
    assert amended is not None and amended.count == 4 and not amended.has(index.lookup(H[3]))
    assert hashes(index.lineage(b"f", view=amended)) == [H[6], H[2], H[1], H[0]]
    # a fast-forward from an "all" view stays "all" (no mask)
    index.checkout(amended)
    index.extend_newest_first([raw(7, [("M", "f", None)], parents=[H[6]])])
    forward = index.view_for(H[7])
    assert forward is not None and forward.count == 5
    # views survive a save and load
    index.checkout(forward)
    again = RepoIndex.decode([RepoIndex.header(), index.encode_segment()])
    assert again.head == H[7] and hashes(again.lineage(b"f")) == [H[7], H[6], H[2], H[1], H[0]]
    assert again.view.count == 5 and again.view_for(H[5]).count == 4


def test_hash_lookup_with_equal_prefixes() -> None:
    same = ["ab" * 8 + f"{i:024x}" for i in range(3)]  # one 8-byte prefix, three hashes
    commits = [RawCommit(h, (), b"a", b"e", 1, b"s", ((("M", b"f", None)),)) for h in same]
    index = RepoIndex()
    index.extend_newest_first(commits)
    assert sorted(index.lookup(h) for h in same) == [0, 1, 2]
    assert index.lookup("ab" * 8 + "f" * 24) is None and index.lookup("zz") is None
    index._lookup.rebuild(index.hashes, len(index))
    assert all(index.hash_of(index.lookup(h)) == h for h in same)
    assert len(index.hashes) == 3 * HASH


def test_builder_answers_partially_while_streaming() -> None:
    builder = IndexBuilder()
    builder.feed([record(H[5], [b"M", b"new.py"], parents=H[4]), record(H[4], [b"R100", b"old.py", b"new.py"])])
    seen, cut = builder.partial(b"new.py", 10)
    assert [c.hash for c in seen] == [H[5], H[4]] and not cut
    builder.feed([record(H[3], [b"M", b"old.py", b"M", b"x"], parents=H[2]), record(H[2], [b"M", b"new.py"])])
    seen, cut = builder.partial(b"new.py", 10)
    assert [c.hash for c in seen] == [H[5], H[4], H[3]]  # old.py's commit, not the older new.py of another life
    assert builder.partial(b"new.py", 2) == (seen[:2], True)
    assert seen[2].changes == (("M", b"old.py", None), ("M", b"x", None))


def test_coedit_levels_cap_ignore_list_and_own_names() -> None:
    sets = [
        ("h1", ["f.py", "g.py"]),
        ("h2", ["f.py", "g.py", "t.py"]),
        ("h3", ["f_old.py", "t.py"]),  # the file's former name is never a partner
        ("h4", ["f.py", "x.py"]),
        ("h5", ["f.py"] + [f"m{i}" for i in range(10)]),  # over the cap: skipped, and not in the denominator
        ("h6", ["f.py", "g.py", "y.py"]),  # listed in the ignore file
    ]
    table = coedit_table(sets, {"f.py", "f_old.py"}, max_changeset_files=5, ignored=lambda h: h == "h6")
    assert table.commits == 4 and table.skipped == 2
    assert [(r.path, r.count, r.level, r.percent) for r in table.rows] == [
        ("g.py", 2, "high", 50),
        ("t.py", 2, "high", 50),
        ("x.py", 1, "medium", 25),
    ]
    assert level(0.5) == "high" and level(0.2) == "medium" and level(0.19) == "low"
    assert len(coedit_table([("h", ["f"] + [f"p{i:02d}" for i in range(30)])], {"f"}, 50).rows) == 20
    as_bytes = coedit_table([("h", [b"f", b"caf\xe9"])], {b"f"}, 5, name=display)
    assert [r.path for r in as_bytes.rows] == ["café"]


def test_blame_porcelain_advance_and_ignore_revs() -> None:
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    porcelain = (
        f"{a} 1 1 2\nauthor Ann\nfilename f\n\tline one\n{a} 2 2\n\tline two\n{b} 3 3 1\nauthor Bob\n\tline three\n"
    ).encode()
    assert parse_porcelain(porcelain) == [a, a, b]
    blame = compact([a, a, b, b, a])
    assert len(blame) == 5 and blame.at(3) == b and blame.at(6) == "" and blame.shas == (a, b)
    # commit c: rewrites line 2, inserts two lines after line 3, deletes line 5
    diff = b"@@ -2 +2 @@\n-x\n+y\n@@ -3,0 +4,2 @@\n+n\n+m\n@@ -5 +6,0 @@\n-z\n"
    hunks = parse_hunks(diff)
    assert hunks == [(2, 1, 2, 1), (3, 0, 4, 2), (5, 1, 6, 0)]
    moved = advance(blame, hunks, c)
    assert [moved.at(i) for i in range(1, 7)] == [a, c, b, c, c, b]
    frame = encode(b"caf\xe9.c", "d" * 40, c, 7, moved)
    assert decode(frame) == (b"caf\xe9.c", "d" * 40, c, 7, moved)
    with pytest.raises(ValueError):
        decode(frame[:-1])
    revs = parse_ignore_revs(f"# reformat\n{a}  # black\n\nnot-a-hash\nbbbbbbb\n")
    assert revs == {a, "bbbbbbb"}
    assert is_ignored(a, revs) and is_ignored(b, revs) and not is_ignored("c" * 40, revs)


def test_index_file_frames_survive_a_torn_append_and_refuse_a_foreign_one(tmp_path: Path) -> None:
    path = tmp_path / "history.idx"
    assert index_file.read_frames(path) is None
    size = index_file.write_frames(path, [b"header", b"one"])
    assert index_file.read_frames(path) == ([b"header", b"one"], size)
    size2 = index_file.append_frame(path, b"two", size)
    assert size2 is not None and index_file.read_frames(path) == ([b"header", b"one", b"two"], size2)
    with open(path, "ab") as handle:  # a crash mid-append leaves half a frame
        handle.write(b"\x10\x00\x00\x00garbage")
    assert index_file.read_frames(path) == ([b"header", b"one", b"two"], size2)
    size3 = index_file.append_frame(path, b"three", size2)  # the torn tail is dropped first
    assert size3 is not None and index_file.read_frames(path)[0] == [b"header", b"one", b"two", b"three"]
    # another process appended a whole frame since we last looked: ours is refused (the caller rewrites)
    assert index_file.append_frame(path, b"four", size2) is None
    assert index_file.read_frames(path)[0][-1] == b"three"


def test_read_head_symbolic_packed_detached_and_worktree_file(tmp_path: Path) -> None:
    git = tmp_path / "w" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    assert read_head(tmp_path / "w") is None  # unborn branch
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{H[1]} refs/heads/main\n^{H[2]}\n")
    assert read_head(tmp_path / "w") == H[1]
    (git / "refs" / "heads" / "main").write_text(H[3] + "\n")  # a loose ref wins over packed-refs
    assert read_head(tmp_path / "w") == H[3]
    (git / "HEAD").write_text(H[4] + "\n")
    assert read_head(tmp_path / "w") == H[4]
    # a linked worktree: .git is a file; HEAD in its gitdir, refs in the common dir
    wt = git / "worktrees" / "other"
    wt.mkdir(parents=True)
    (wt / "HEAD").write_text("ref: refs/heads/main\n")
    (wt / "commondir").write_text("../..\n")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / ".git").write_text(f"gitdir: {wt}\n")
    assert read_head(tmp_path / "o") == H[3]
    assert read_head(tmp_path / "nothing") is None


def test_card_and_block_use_summaries_when_present() -> None:
    index = build([raw(0, [("A", "f.py", None)], author=b"Ann"), raw(1, [("M", "f.py", None)], author=b"Bob")])
    lin = index.lineage(b"f.py")
    view = HistoryView(
        "f.py",
        "/repo",
        lin.commits,
        2,
        True,
        CoeditTable(2, ()),
        summary=lambda c: "did things" if c.hash == H[1] else None,
    )
    card = hover_card(view, authors_of(lin.commits), 3, lin.commits[1], "")
    assert "2 commits by 2 authors" in card and "Ann (1), Bob (1)" in card
    assert f"`{H[1][:7]}` Bob: did things" in card and "**Line 3** last changed" in card and "subject 0" in card
    assert "building" not in card
    block = file_history_block(view)
    assert block.startswith("{file-history}\nFile: f.py\nRepository: /repo\n") and block.endswith("{/file-history}")
    history = block.split("History, oldest first:\n")[1].split("\n\n")[0].splitlines()
    assert history[0].endswith("Ann: subject 0") and history[1].endswith("Bob: did things")
    assert "- None found." in block
    assert f"- {H[1]} ({H[1][:7]}): did things" in block


def test_partial_card_says_so() -> None:
    index = build([raw(i, [("M", "f.py", None)]) for i in range(3)])
    lin = index.lineage(b"f.py", limit=2)
    view = HistoryView("f.py", "/repo", lin.commits, 2, lin.complete, CoeditTable(2, ()), building=True)
    card = hover_card(view, authors_of(lin.commits))
    assert "2+ commits by 1 author so far, … →" in card and "building history…" in card
    empty = HistoryView("f.py", "/repo", (), 0, False, CoeditTable(0, ()), building=True)
    assert "building history…" in hover_card(empty, [])


def test_streamed_build_equals_commit_by_commit_build() -> None:
    stream = (
        record(H[5], [b"M", b"c", b"D", b"x"], parents=H[4])
        + record(H[4], [], parents=f"{H[3]} {H[2]}")
        + record(H[3], [b"R100", b"a", b"c", b"M", b"b"], parents=H[2])
        + record(H[2], [b"A", b"x", b"M", b"a"], parents=H[1])
        + record(H[1], [b"A", b"a", b"A", b"b"], parents="")
    )
    chunks = [stream[i : i + 5] for i in range(0, len(stream), 5)]
    fast_builder = IndexBuilder()
    fast_builder.feed(chunks)
    fast_builder.finish()
    fast = fast_builder.index
    slow = RepoIndex()
    slow.extend_newest_first(parse_log(chunks))
    assert normalised(fast) == normalised(slow)  # path ids may differ (interning order); meaning may not
    assert fast.lineage(b"c") == slow.lineage(b"c")
    assert hashes(fast.lineage(b"c")) == [H[5], H[3], H[2], H[1]]
    assert list(raw_commits(fast, range(len(fast)))) == list(raw_commits(slow, range(len(slow))))


def normalised(index: RepoIndex) -> dict:
    p = index.paths
    return {
        "commits": [
            (c.hash, c.parents, c.author, c.time, c.subject, sorted(c.changes, key=repr))
            for c in raw_commits(index, range(len(index)))
        ],
        "by_path": {p[k]: list(v) for k, v in index.by_path.items()},
        "renames": sorted((c, p[o], p[n]) for n, moves in index.renames_into.items() for c, o in moves),
        "renames_from": sorted((c, p[o], p[n]) for o, moves in index.renames_from.items() for c, n in moves),
        "gone": {p[k]: list(v) for k, v in index.gone.items()},
        "path_ids": {p[i]: i for i in range(len(p))} == index.path_ids,
    }
