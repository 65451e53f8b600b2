"""Pure history/co-edit domain: log parsing, the rename-following index, co-edit levels, blame, refs, render."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.history.coedits import coedit_table, level
from nagent_lsp.history.blame import is_ignored, parse_ignore_revs, parse_porcelain
from nagent_lsp.history.index import RepoIndex
from nagent_lsp.history.logparse import RawCommit, parse_log
from nagent_lsp.history.refs import read_head
from nagent_lsp.history.render import HistoryView, file_history_block, hover_card, authors_of
from nagent_lsp.history.coedits import CoeditTable

H = [f"{i:040x}" for i in range(1, 30)]


def raw(i: int, changes, author="Ann", email="ann@x", parents=None) -> RawCommit:
    return RawCommit(H[i], tuple(parents or ()), author, email, 1_700_000_000 + i * 86400, f"subject {i}", tuple(changes))


def record(sha: str, changes: list[bytes], parents: str = "p", subject: bytes = b"msg") -> bytes:
    head = b"\x01" + sha.encode() + b"\x1f" + parents.encode() + b"\x1fAnn\x1fann@x\x1f1700000000\x1f" + subject + b"\0"
    return head + (b"\n" + b"\0".join(changes) + b"\0" if changes else b"")


def test_parse_log_handles_renames_odd_names_merges_and_chunk_boundaries() -> None:
    stream = (
        record(H[0], [b"R100", b"old name.txt", b"new\tname.txt", b"M", b"caf\xc3\xa9.py"])
        + record(H[1], [], parents="a b", subject=b"Merge x")
        + record(H[2], [b"A", b"a", b"D", b"b", b"C75", b"src", b"copy"])
    )
    # split into 7-byte chunks so records and fields straddle chunk boundaries
    commits = list(parse_log(stream[i : i + 7] for i in range(0, len(stream), 7)))
    assert [c.hash for c in commits] == [H[0], H[1], H[2]]
    assert commits[0].changes == (("R", "new\tname.txt", "old name.txt"), ("M", "café.py", None))
    assert commits[1].parents == ("a", "b") and commits[1].changes == ()
    assert commits[2].changes == (("A", "a", None), ("D", "b", None), ("C", "copy", "src"))
    assert commits[0].author == "Ann" and commits[0].time == 1700000000


def build(commits: list[RawCommit]) -> RepoIndex:
    index = RepoIndex()
    index.extend_newest_first(list(reversed(commits)))
    return index


def test_lineage_follows_renames_and_a_reused_name_does_not_leak() -> None:
    index = build([
        raw(0, [("A", "b.py", None), ("A", "x.py", None)]),
        raw(1, [("M", "b.py", None)]),
        raw(2, [("R", "c.py", "b.py")]),            # b -> c
        raw(3, [("A", "a.py", None)]),
        raw(4, [("M", "a.py", None), ("M", "x.py", None)]),
        raw(5, [("R", "b.py", "a.py")]),            # a -> b: the name b.py is reused
        raw(6, [("M", "b.py", None), ("M", "c.py", None)]),
    ])
    lin = index.lineage("b.py")
    assert [c.hash for c in lin.commits] == [H[6], H[5], H[4], H[3]]
    assert [c.path for c in lin.commits] == ["b.py", "b.py", "a.py", "a.py"]
    assert lin.names == {"b.py", "a.py"} and lin.complete
    assert [c.hash for c in index.lineage("c.py").commits] == [H[6], H[2], H[1], H[0]]
    limited = index.lineage("c.py", limit=2)
    assert len(limited.commits) == 2 and not limited.complete
    # a partner seen under an old name is reported under the name it has now
    assert index.paths[index.canonical(index.path_ids["a.py"], 4)] == "b.py"
    assert index.paths[index.canonical(index.path_ids["b.py"], 1)] == "c.py"
    assert index.paths[index.canonical(index.path_ids["b.py"], 6)] == "b.py"


def test_index_json_roundtrip_and_incremental_append() -> None:
    index = build([raw(0, [("A", "a", None), ("A", "b", None)]), raw(1, [("R", "c", "a")]), raw(2, [("D", "b", None)])])
    index.head = H[2]
    again = RepoIndex.from_json(index.to_json())
    assert again.head == H[2] and again.hashes == index.hashes and again.changes == index.changes
    assert again.lineage("c") == index.lineage("c")
    assert again.dead == {index.path_ids["a"], index.path_ids["b"]}
    assert again.extend_newest_first([raw(3, [("M", "c", None)]), raw(2, [])]) == 1  # known commit skipped
    assert [c.hash for c in again.lineage("c").commits] == [H[3], H[1], H[0]]


def test_coedit_levels_cap_ignore_list_and_own_names() -> None:
    sets = [
        ("h1", ["f.py", "g.py"]),
        ("h2", ["f.py", "g.py", "t.py"]),
        ("h3", ["f_old.py", "t.py"]),                      # the file's former name is never a partner
        ("h4", ["f.py", "x.py"]),
        ("h5", ["f.py"] + [f"m{i}" for i in range(10)]),   # over the cap: skipped, and not in the denominator
        ("h6", ["f.py", "g.py", "y.py"]),                  # listed in the ignore file
    ]
    table = coedit_table(sets, {"f.py", "f_old.py"}, max_changeset_files=5, ignored=lambda h: h == "h6")
    assert table.commits == 4 and table.skipped == 2
    assert [(r.path, r.count, r.level, r.percent) for r in table.rows] == [
        ("g.py", 2, "high", 50), ("t.py", 2, "high", 50), ("x.py", 1, "medium", 25),
    ]
    assert level(0.5) == "high" and level(0.2) == "medium" and level(0.19) == "low"
    assert len(coedit_table([("h", ["f"] + [f"p{i:02d}" for i in range(30)])], {"f"}, 50).rows) == 20


def test_blame_porcelain_and_ignore_revs() -> None:
    a, b = "a" * 40, "b" * 40
    porcelain = (
        f"{a} 1 1 2\nauthor Ann\nfilename f\n\tline one\n{a} 2 2\n\tline two\n{b} 3 3 1\nauthor Bob\n\tline three\n"
    ).encode()
    assert parse_porcelain(porcelain) == [a, a, b]
    revs = parse_ignore_revs(f"# reformat\n{a}  # black\n\nnot-a-hash\nbbbbbbb\n")
    assert revs == {a, "bbbbbbb"}
    assert is_ignored(a, revs) and is_ignored(b, revs) and not is_ignored("c" * 40, revs)


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
    index = build([raw(0, [("A", "f.py", None)], author="Ann"), raw(1, [("M", "f.py", None)], author="Bob")])
    lin = index.lineage("f.py")
    view = HistoryView("f.py", "/repo", lin.commits, 2, True, CoeditTable(2, ()),
                       summary=lambda c: "did things" if c.hash == H[1] else None)
    card = hover_card(view, authors_of(lin.commits), 3, lin.commits[1], "")
    assert "2 commits by 2 authors" in card and "Ann (1), Bob (1)" in card
    assert f"`{H[1][:7]}` Bob: did things" in card and f"**Line 3** last changed" in card and "subject 0" in card
    block = file_history_block(view)
    assert block.startswith("{file-history}\nFile: f.py\nRepository: /repo\n") and block.endswith("{/file-history}")
    history = block.split("History, oldest first:\n")[1].split("\n\n")[0].splitlines()
    assert history[0].endswith("Ann: subject 0") and history[1].endswith("Bob: did things")
    assert "- None found." in block
    assert f"- {H[1]} ({H[1][:7]}): did things" in block


def test_streamed_build_equals_commit_by_commit_build() -> None:
    stream = (
        record(H[5], [b"M", b"c", b"D", b"x"])
        + record(H[4], [], parents="p q")
        + record(H[3], [b"R100", b"a", b"c", b"M", b"b"])
        + record(H[2], [b"A", b"x", b"M", b"a"])
        + record(H[1], [b"A", b"a", b"A", b"b"], parents="")
    )
    chunks = [stream[i : i + 5] for i in range(0, len(stream), 5)]
    fast = RepoIndex.from_log_stream(chunks)
    slow = RepoIndex()
    slow.extend_newest_first(parse_log(chunks))
    assert normalised(fast) == normalised(slow)  # path ids may differ (interning order); meaning may not
    assert fast.lineage("c") == slow.lineage("c")
    assert [c.hash for c in fast.lineage("c").commits] == [H[5], H[3], H[2], H[1]]


def normalised(index: RepoIndex) -> dict:
    p = index.paths
    return {
        "commits": list(zip(index.hashes, [index.people[a] for a in index.author], index.time, index.subject,
                            index.merge, [sorted(p[x] for x in c) for c in index.changes])),
        "by_path": {p[k]: v for k, v in index.by_path.items()},
        "renames": sorted((c, p[o], p[n]) for n, moves in index.renames_into.items() for c, o in moves),
        "renames_from": sorted((c, p[o], p[n]) for o, moves in index.renames_from.items() for c, n in moves),
        "dead": sorted(p[x] for x in index.dead),
        "path_ids": {p[i]: i for i in range(len(p))} == index.path_ids,
    }
