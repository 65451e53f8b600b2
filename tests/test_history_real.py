"""History on real repositories: git's bytes end to end, the persisted index across a restart, HEAD moves that
reuse the index, day-one partial answers, state and progress reporting, bounded caches.

Repositories are built with `git fast-import`, which writes names, messages and paths byte for byte (`git commit`
would re-encode a Latin-1 author into UTF-8, which is not what old histories such as git.git's 7eb93c8965 hold).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history import blame as blame_format
from nagent_lsp.history import file_history, line_blame
from nagent_lsp.history.blame import compact, parse_porcelain
from nagent_lsp.history.git import GitRepository
from nagent_lsp.history.index import RepoIndex
from nagent_lsp.history.logparse import split_records
from nagent_lsp.history.service import HistoryEvent, HistoryService
from nagent_lsp.store import history_index as frames_file
from tests.harness.gitrepo import git, git_env
from tests.harness.lsp import open_editor, wait_until

LATIN1_AUTHOR = b"David K\xe5gedal"  # as in git.git's 7eb93c8965: Latin-1, no encoding header
ODD_SUBJECT = b"caf\xe9: fix \xff"  # not UTF-8 either
ODD_PATH = b"data/r\xe9sum\xe9.txt"  # a file name that is not UTF-8
NOISE = 1200  # commits that do not touch the files under test (enough for the build to show progress)


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def fast_import(root: Path, commits: list[dict], branch: str = "main") -> list[str]:
    """Commits made byte for byte. Each: author (bytes), message (bytes), files {path: bytes | None (delete)},
    optional encoding (a header git re-encodes from) and parent (index into `commits`, default the previous one).
    Returns the hashes; the work tree is checked out at the branch."""
    fresh = not (root / ".git").exists()
    if fresh:
        root.mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q", "-b", branch)
    stream = bytearray()
    base = 1_700_000_000
    start = int(git(root, "rev-list", "--count", "--all").strip() or 0) if not fresh else 0
    for i, c in enumerate(commits, 1):
        when = base + (start + i) * 3600
        author = c.get("author", b"Ann Lee")
        stream += b"commit refs/heads/%s\nmark :%d\n" % (branch.encode(), i)
        stream += b"author %s <%s> %d +0000\n" % (author, c.get("email", b"ann@example.com"), when)
        stream += b"committer Harness Committer <committer@example.com> %d +0000\n" % when
        if c.get("encoding"):
            stream += b"encoding %s\n" % c["encoding"]
        stream += _data(c["message"])
        parent = c.get("parent", i - 1 if i > 1 else None)
        if parent is not None:
            stream += b"from :%d\n" % parent
        elif not fresh:
            stream += b"from %s^0\n" % branch.encode()
        for path, content in c.get("files", {}).items():
            if content is None:
                stream += b"D %s\n" % path
            else:
                stream += b"M 100644 inline %s\n" % path + _data(content)
        stream += b"\n"
    marks = root / ".git" / "nagent-test-marks"
    subprocess.run(
        ["git", "fast-import", "--quiet", f"--export-marks={marks}"],
        cwd=root,
        env=git_env(),
        input=bytes(stream),
        check=True,
        capture_output=True,
    )
    found = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    git(root, "reset", "-q", "--hard", branch)
    return [found[f":{i}"] for i in range(1, len(commits) + 1)]


def odd_repo(root: Path) -> dict[str, str]:
    """src/app.py and a Latin-1-named file change together in commits by a Latin-1 author, among noise."""
    commits: list[dict] = [
        {"message": b"start", "files": {b"src/app.py": b"one\ntwo\n", b"util.py": b"u\n"}},
        *({"message": b"noise %d" % i, "files": {b"noise/n%d.txt" % (i % 40): b"%d\n" % i}} for i in range(NOISE)),
        {
            "message": ODD_SUBJECT + b"\n\nbody \xff",
            "author": LATIN1_AUTHOR,
            "email": b"davidk@lysator.liu.se",
            "files": {b"src/app.py": b"ONE\ntwo\n", ODD_PATH: b"x\n"},
        },
        {
            "message": b"app, resume and util",
            "files": {b"src/app.py": b"ONE\ntwo\nthree\n", ODD_PATH: b"y\n", b"util.py": b"u2\n"},
        },
        {
            "message": b"r\xe9sum\xe9 only",
            "author": b"J\xf6rg",
            "email": b"jorg@example.com",
            "encoding": b"iso-8859-1",
            "files": {ODD_PATH: b"z\n"},
        },
    ]
    h = fast_import(root, commits)
    return {"start": h[0], "odd": h[-3], "both": h[-2], "jorg": h[-1]}


def odd_file(root: Path) -> Path:
    return Path(os.fsdecode(os.fsencode(root) + b"/" + ODD_PATH))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("odd") / "repo"
    return root, odd_repo(root)


@pytest.fixture
def repo(template, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    shutil.copytree(template[0], root, symlinks=True)
    return root, dict(template[1])


def index_file(root: Path) -> Path | None:
    found = sorted((root / ".nagent" / "cache").glob("history-*.idx"))
    return found[0] if found else None


async def test_non_utf8_history_end_to_end_and_index_persisted_across_restart(repo, isolated_home: Path) -> None:
    root, h = repo
    app = root / "src" / "app.py"
    odd = odd_file(root)
    assert odd.exists()
    async with open_editor("vscode", root, isolated_home) as editor:
        app_uri, odd_uri = editor.uri(app), editor.uri(odd)
        assert "%E9" in odd_uri  # the editor names the file by its bytes

        async def ready() -> bool:
            return (await editor.command("nagent.status"))["history"]["state"] == "ready"

        assert (await editor.command("nagent.status"))["history"] == {"state": "idle"}  # nothing asked yet
        # the first request may be answered before the index is ready (a first page): the same data either way
        first = await editor.command("nagent.history", {"uri": app_uri})
        assert [c["hash"] for c in first["commits"]] == [h["both"], h["odd"], h["start"]]
        await wait_until_async(ready)
        status = (await editor.command("nagent.status"))["history"]
        assert status == {"state": "ready", "commits": NOISE + 4}

        result = await editor.command("nagent.history", {"uri": app_uri})
        assert "partial" not in result
        assert [c["hash"] for c in result["commits"]] == [h["both"], h["odd"], h["start"]]
        odd_commit = result["commits"][1]
        assert odd_commit["author"] == "David Kågedal" and odd_commit["email"] == "davidk@lysator.liu.se"
        assert odd_commit["subject"] == "café: fix ÿ"
        assert {"name": "David Kågedal", "email": "davidk@lysator.liu.se", "commits": 1} in result["authors"]
        assert {"path": "data/résumé.txt", "count": 2, "rate": round(2 / 3, 4), "level": "high"} in result["coedits"]
        assert "David Kågedal" in result["markdown"] and "data/résumé.txt" in result["markdown"]

        named = await editor.command("nagent.history", {"uri": odd_uri})
        assert named["file"] == "data/résumé.txt"
        assert [c["hash"] for c in named["commits"]] == [h["jorg"], h["both"], h["odd"]]
        assert named["commits"][0]["author"] == "Jörg"  # re-encoded by git from its encoding header
        coedits = await editor.command("nagent.coedits", {"uri": app_uri})
        assert coedits["file"] == "src/app.py" and coedits["commits"] == 3
        assert coedits["rows"][0] == {"path": "data/résumé.txt", "count": 2, "rate": round(2 / 3, 4), "level": "high"}

        editor.open(app)

        async def card(path: Path, line: int) -> str:
            hover = await editor.hover(path, line)
            return hover.contents.value if hover else ""

        text = await poll(lambda: card(app, 0), lambda t: "**Line 1** last changed" in t)
        assert "3 commits by 2 authors" in text and "David Kågedal (1)" in text
        assert f"**Line 1** last changed 2024-01-04 `{h['odd'][:7]}` David Kågedal: café: fix ÿ" in text
        assert "`data/résumé.txt` high (67%)" in text
        odd_card = await poll(lambda: card(odd, 0), lambda t: "Line 1" in t)
        assert "**History of `data/résumé.txt`**: 3 commits by 3 authors" in odd_card and "Jörg" in odd_card

        # the build was big enough to show progress: one begin, reports, one end
        await wait_until(lambda: any(r[-1].kind == "end" for r in editor.client.progress_reports.values()))
        (reports,) = [r for r in editor.client.progress_reports.values() if r[0].title == "Indexing git history"]
        assert reports[0].kind == "begin" and reports[-1].kind == "end" and "commits" in (reports[-1].message or "")
        assert not [m for m in editor.client.log_messages if m.type.value <= 2]  # no error or warning
        saved = index_file(root)
        assert saved is not None
        before = saved.stat()

    # a restarted server answers from the persisted index: it loads it (the file is not rewritten: same inode)
    async with open_editor("neovim", root, isolated_home) as editor:
        again = await editor.command("nagent.history", {"uri": odd_uri})
        assert again["commits"] == named["commits"] and again["file"] == "data/résumé.txt"

        async def ready_again() -> bool:
            return (await editor.command("nagent.status"))["history"]["state"] == "ready"

        await wait_until_async(ready_again)
        loaded = saved.stat()
        assert (loaded.st_ino, loaded.st_size, loaded.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
        # a new commit is appended to the same file, not written whole
        later = fast_import(
            root,
            [
                {
                    "message": b"\xe9t\xe9",
                    "author": LATIN1_AUTHOR,
                    "email": b"davidk@lysator.liu.se",
                    "files": {b"src/app.py": b"ONE\ntwo\nthree\nfour\n"},
                }
            ],
        )[0]
        editor.open(app)

        async def card_again() -> str:
            hover = await editor.hover(app, 3)
            return hover.contents.value if hover else ""

        text = await poll(card_again, lambda t: later[:7] in t and "**Line 4** last changed" in t)
        assert "4 commits by 2 authors" in text and f"`{later[:7]}` David Kågedal: été" in text
        await wait_until(lambda: saved.stat().st_size > before.st_size)
        grown = saved.stat()
        assert grown.st_ino == before.st_ino and 0 < grown.st_size - before.st_size < 4096


async def wait_until_async(check, timeout: float = 120.0) -> bool:
    """wait_until for an async condition (the timeout only bounds a test that is failing)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def poll(fetch, check, timeout: float = 120.0):
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await fetch()
        if check(value) or loop.time() > deadline:
            return value
        await asyncio.sleep(0.05)


# -- the service on real repositories (no editor) ------------------------------------------------------------------


class GatedGit(GitRepository):
    """Real git, but the whole-repository pass stops after its first `first` commits until `build_gate` is set,
    and incremental passes (with an exclude list) wait for `update_gate`."""

    def __init__(self, root: Path, first: int = 0):
        super().__init__(root)
        self.first = first
        self.build_gate = threading.Event()
        self.update_gate = threading.Event()
        self.update_gate.set()

    def log_all(self, revision="HEAD", exclude=()):
        chunks = super().log_all(revision, exclude)
        if exclude:
            assert self.update_gate.wait(120), "the test never released the update"
            yield from chunks
            return
        records = list(split_records(chunks))
        # the first records, and the separator that tells the parser the last of them is complete
        yield b"".join(b"\x01" + r for r in records[: self.first]) + b"\x01"
        assert self.build_gate.wait(120), "the test never released the build"
        yield b"\x01".join(records[self.first :])


def full_history(root: Path, rel: str, *older: str) -> list[str]:
    return git(root, "log", "--full-history", "--no-merges", "--format=%H", "--", rel, *older).split()


def simple_repo(root: Path, n: int = 12) -> list[str]:
    commits = [
        {"message": b"c%d" % i, "files": {b"f.txt": b"%d\n" % i, b"g%d.txt" % (i % 3): b"x\n"}} for i in range(n)
    ]
    return fast_import(root, commits)


def test_day_one_partial_answers_refine_and_never_claim_completeness(tmp_path, monkeypatch) -> None:
    root = tmp_path / "repo"
    h = simple_repo(root)
    monkeypatch.setattr(file_history, "FIRST_PAGE", 2)
    gated = GatedGit(root, first=5)
    service = HistoryService(root, tmp_path / "cache", git=gated)
    events: list[HistoryEvent] = []
    service.add_listener(lambda _s, e: events.append(e))
    assert service.status() == {"state": "idle"}
    service.start()
    hs = HistorySettings()
    # before the stream has delivered anything, or once it has: never complete while building
    entry = service.entry("f.txt", hs, sync=False, wait=60)
    assert entry.partial and entry.view.building and not entry.view.complete
    assert [c.hash for c in entry.view.commits][:2] == [h[-1], h[-2]]
    assert service.status()["state"] == "building"
    # the page holds 2 commits; the stream has shown 5: a later hover shows the 5, still marked partial
    assert wait_for(lambda: service.keeper.builder is not None and service.keeper.builder.count == 5)
    refined = service.entry("f.txt", hs, sync=False, wait=60)
    assert [c.hash for c in refined.view.commits] == h[::-1][:5] and not refined.view.complete
    from nagent_lsp.history import render

    card = render.hover_card(refined.view, refined.all_authors)
    assert "5+ commits" in card and "building history…" in card
    gated.build_gate.set()
    assert service.wait_ready(60)
    done = service.entry("f.txt", hs, sync=False)
    assert not done.partial and done.view.complete and [c.hash for c in done.view.commits] == h[::-1]
    assert "building" not in render.hover_card(done.view, done.all_authors)
    assert service.status() == {"state": "ready", "commits": 12}
    assert [e.kind for e in events] == []  # 12 commits: too small to show progress
    service.close()


def test_first_pages_keep_git_bytes_before_the_index_exists(repo, tmp_path) -> None:
    root, h = repo
    service = HistoryService(root, tmp_path / "cache")  # never started: per-file pages only
    odd = service.entry(os.fsdecode(ODD_PATH), HistorySettings())
    assert odd.partial and odd.view.file == "data/résumé.txt"
    assert [(c.hash, c.author, c.path) for c in odd.view.commits] == [
        (h["jorg"], "Jörg", "data/résumé.txt"),
        (h["both"], "Ann Lee", "data/résumé.txt"),
        (h["odd"], "David Kågedal", "data/résumé.txt"),
    ]
    assert odd.view.commits[0].raw_path == ODD_PATH and odd.names == {ODD_PATH}
    app = service.entry("src/app.py", HistorySettings())
    assert app.view.commits[1].subject == "café: fix ÿ"
    assert [r.path for r in app.view.coedits.rows][:1] == ["data/résumé.txt"]
    service.close()


def test_cold_page_is_bounded_follows_renames_and_is_exact_when_short(tmp_path) -> None:
    root = tmp_path / "repo"
    commits = [{"message": b"c%d" % i, "files": {b"old.txt": b"%d\n" % i}} for i in range(4)]
    commits.append({"message": b"move", "files": {b"old.txt": None, b"new.txt": b"3\n"}})
    commits += [{"message": b"n%d" % i, "files": {b"new.txt": b"n%d\n" % i}} for i in range(3)]
    h = fast_import(root, commits)
    service = HistoryService(root, tmp_path / "cache")  # never started: per-file pages only
    whole = service.entry("new.txt", HistorySettings())
    assert [c.hash for c in whole.view.commits] == h[::-1] and whole.view.complete and whole.partial
    assert service.counters.pages == 2  # one page per name
    capped = service.entry("new.txt", HistorySettings(maxCommits=5))
    assert len(capped.view.commits) == 5 and not capped.view.complete  # more exist: never "complete"
    service.close()


def test_amend_switch_and_back_reuse_the_index(tmp_path) -> None:
    root = tmp_path / "repo"
    h = simple_repo(root)
    git(root, "branch", "side", h[5])
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    hs = HistorySettings()
    view = lambda: [c.hash for c in service.entry("f.txt", hs).view.commits]  # noqa: E731
    assert view() == full_history(root, "f.txt")
    processes = service.counters.git_processes
    # amend: one git log reads the one new commit; nothing is rebuilt
    git(root, "commit", "-q", "--amend", "-m", "amended", env=git_env({"GIT_AUTHOR_DATE": "@1800000000 +0000"}))
    assert view() == full_history(root, "f.txt") and h[-1] not in view()
    assert service.counters.builds == 1 and service.counters.appended == 1
    assert service.counters.git_processes == processes + 1
    # a switch to a commit the index has, and back: no git at all
    amended = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "side")
    assert view() == full_history(root, "f.txt") == h[5::-1]
    git(root, "checkout", "-q", "main")
    assert view()[0] == amended
    assert service.counters.git_processes == processes + 1 and service.counters.builds == 1
    # a new branch from the side branch: only its own commit is read
    git(root, "checkout", "-q", "-b", "topic", "side")
    topic = fast_import(root, [{"message": b"t", "files": {b"f.txt": b"t\n"}}], branch="topic")[0]
    assert view() == [topic, *h[5::-1]]
    assert service.counters.appended == 2 and service.counters.builds == 1
    # persisted as appended segments; a fresh service loads the view of the current HEAD
    service.keeper.pool.submit(lambda: None).result()
    assert service.counters.rewrites == 1 and service.counters.appends >= 3
    again = HistoryService(root, service.cache_dir)
    again.start().result()
    assert again.counters.loads == 1 and again.counters.builds == 0
    assert [c.hash for c in again.entry("f.txt", hs).view.commits] == [topic, *h[5::-1]]
    service.close()
    again.close()


def test_a_hover_after_a_switch_never_answers_from_the_old_head(tmp_path) -> None:
    root = tmp_path / "repo"
    h = simple_repo(root)
    gated = GatedGit(root)
    gated.build_gate.set()
    service = HistoryService(root, tmp_path / "cache", git=gated)
    service.start().result()
    hs = HistorySettings()
    gated.update_gate.clear()  # the index update will hang until released
    git(root, "checkout", "-q", "-b", "other", h[3])
    new = fast_import(root, [{"message": b"o", "files": {b"f.txt": b"o\n"}}], branch="other")[0]
    entry = service.entry("f.txt", hs, sync=False, wait=0.0)
    assert entry.partial and entry.head == new
    assert [c.hash for c in entry.view.commits] in ([], [new, *h[3::-1]])  # the new HEAD's, or nothing yet
    entry = service.entry("f.txt", hs, sync=False, wait=60)  # the page for the new HEAD (the update still hangs)
    assert [c.hash for c in entry.view.commits] == [new, *h[3::-1]] and entry.partial
    gated.update_gate.set()
    assert service.refresh()
    assert [c.hash for c in service.entry("f.txt", hs).view.commits] == [new, *h[3::-1]]
    service.close()


def test_blame_is_carried_or_advanced_across_new_commits(tmp_path) -> None:
    root = tmp_path / "repo"
    lines = [b"line %d\n" % i for i in range(8)]
    h = fast_import(
        root,
        [
            {"message": b"start", "files": {b"f.txt": b"".join(lines), b"other.txt": b"o\n"}},
            {"message": b"edit 3", "files": {b"f.txt": b"".join(lines[:3] + [b"THREE\n"] + lines[4:])}},
        ],
    )
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    hs = HistorySettings()

    def line_commits() -> list[str]:
        entry = service.entry("f.txt", hs)
        service.line_commit("f.txt", 1, entry, wait=0)
        assert service.wait_blame("f.txt", 60)
        out = []
        for n in range(1, len(root.joinpath("f.txt").read_bytes().splitlines()) + 1):
            commit, _state = service.line_commit("f.txt", n, entry)
            out.append(commit.hash if commit else "")
        return out

    def real_blame() -> list[str]:
        return parse_porcelain(
            subprocess.run(
                ["git", "blame", "--porcelain", "HEAD", "--", "f.txt"], cwd=root, capture_output=True, check=True
            ).stdout
        )

    assert line_commits() == real_blame()
    assert service.counters.blame_runs == 1
    # a commit that does not touch the file: the blame is carried over, no git
    fast_import(root, [{"message": b"other", "files": {b"other.txt": b"o2\n"}}])
    assert line_commits() == real_blame()
    assert service.counters.blame_runs == 1 and service.counters.blame_reused == 1
    # one commit that changes the file: the blame moves forward by its diff, not by a new blame
    text = lines[:1] + [b"ONE\n", b"inserted\n"] + lines[2:3] + [b"THREE\n"] + lines[4:6]
    fast_import(root, [{"message": b"edit", "files": {b"f.txt": b"".join(text)}}])
    assert line_commits() == real_blame()
    assert service.counters.blame_runs == 1 and service.counters.blame_advanced == 1
    assert h[0] in real_blame() and h[1] in real_blame()
    service.close()
    # a restarted service has the blames the last one made: no git blame for the same HEAD
    again = HistoryService(root, service.cache_dir)
    again.start().result()
    service = again
    assert line_commits() == real_blame()
    assert again.counters.blame_runs == 0 and again.counters.blame_advanced == 0
    again.close()


def test_blame_cache_is_bounded_by_files_lines_and_heads(tmp_path, monkeypatch) -> None:
    """The blames a previous run left (loaded through the same LRU a running server fills): at most BLAME_HEADS per
    file, BLAME_FILES files and BLAME_BYTES bytes in all, the most recently made kept; a file too big for the byte
    budget is kept alone rather than refused."""
    monkeypatch.setattr(line_blame, "BLAME_FILES", 4)
    monkeypatch.setattr(line_blame, "BLAME_HEADS", 2)
    root = tmp_path / "repo"
    simple_repo(root, 1)
    service = HistoryService(root, tmp_path / "cache")
    sha = "ab" * 20

    def frame(path: bytes, head: str, lines: int) -> bytes:
        return blame_format.encode(path, head, sha, 1, compact([sha] * lines))

    heads = [f"{i:040x}" for i in range(3)]
    frames = [frame(b"f%d.txt" % f, head, 10) for f in range(6) for head in heads]
    frames_file.write_frames(service.blame_path, frames)
    service.blame.load()
    kept = {path: [b.head for b in blames] for path, blames in service.blame.cache.items()}
    assert kept == {b"f%d.txt" % f: heads[1:] for f in range(2, 6)}  # the newest files, each with its newest heads
    assert service.blame.cache.currsize == 4 * (2 * 64 + 2 * (120 + 10 * 4 + 97))  # bytes: 10 lines, 1 commit each

    huge = line_blame.BLAME_BYTES // 4 + 5
    frames_file.write_frames(service.blame_path, [*frames, frame(b"huge.txt", heads[0], huge)])
    service.blame.load()
    assert list(service.blame.cache) == [b"huge.txt"]  # everything older made room for it
    assert service.blame.cache.currsize == line_blame.BLAME_BYTES
    assert line_blame.BLAME_BYTES <= 16 * 2**20  # the blame cache's ceiling: a few MB
    service.close()


def test_failed_build_is_reported_and_pages_still_answer(tmp_path) -> None:
    root = tmp_path / "repo"
    h = simple_repo(root, 3)

    class Broken(GitRepository):
        def log_all(self, revision="HEAD", exclude=()):
            raise RuntimeError("disk on fire")

    service = HistoryService(root, tmp_path / "cache", git=Broken(root))
    assert service.start().result() is False
    status = service.status()
    assert status["state"] == "failed" and "disk on fire" in status["error"]
    assert [c.hash for c in service.entry("f.txt", HistorySettings()).view.commits] == h[::-1]
    service.close()


def wait_for(condition, timeout: float = 60.0) -> bool:
    """Thread-side wait for a condition another thread makes true (an Event would need hooks in the code)."""
    done = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if condition():
                done.set()
                return
            stop.wait(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    done.wait(timeout)
    stop.set()
    return done.is_set()


def test_a_tampered_index_file_answers_from_git_until_it_is_rebuilt(tmp_path, monkeypatch) -> None:
    """A persisted index is loaded without its ids checked (so the first hover after a restart is answered from it
    at once), then validated in the background: a file with a wrong id (a stranger's state root) never gives a
    wrong answer or an error: a query that trips over it is answered by a first page, and the index is rebuilt."""
    root = tmp_path / "repo"
    h = simple_repo(root, 6)
    first = HistoryService(root, tmp_path / "cache")
    assert first.start().result()
    first.close()
    frames, _ = frames_file.read_frames(first.index_path)
    index = RepoIndex.decode(frames)
    del frames
    index.ch_pid[0] = 10_000  # every length right, one path id wrong
    frames_file.write_frames(first.index_path, [RepoIndex.header(), index.encode_segment()])

    checking, release_check = threading.Event(), threading.Event()
    validate = RepoIndex.validate

    def slow_validate(self: RepoIndex) -> None:
        checking.set()
        assert release_check.wait(60), "the test never released the check"
        validate(self)

    monkeypatch.setattr(RepoIndex, "validate", slow_validate)
    service = HistoryService(root, tmp_path / "cache")
    started = service.start()
    assert checking.wait(60)  # loaded and installed, not yet validated
    early = service.entry("g0.txt", HistorySettings())
    assert early.partial and [c.hash for c in early.view.commits] == full_history(root, "g0.txt")
    release_check.set()
    assert started.result()
    assert wait_for(lambda: service.counters.builds == 1)  # dropped and rebuilt
    assert service.counters.loads == 1
    service.keeper.ready.wait(60)
    late = service.entry("g0.txt", HistorySettings())
    assert not late.partial and [c.hash for c in late.view.commits] == full_history(root, "g0.txt")
    assert [c.hash for c in service.entry("f.txt", HistorySettings()).view.commits] == h[::-1]
    service.close()


def test_local_branches_are_prepared_so_a_first_switch_reads_nothing(tmp_path) -> None:
    """After the index is ready, the views of the most recently updated local branches are made in the background
    (their commits read if the pool lacks them): the first switch to one runs no git process and repaints nothing."""
    root = tmp_path / "repo"
    h = simple_repo(root)
    git(root, "checkout", "-q", "-b", "topic", h[3])
    topic = fast_import(root, [{"message": b"t%d" % i, "files": {b"f.txt": b"t%d\n" % i}} for i in range(2)], "topic")
    git(root, "checkout", "-q", "main")
    service = HistoryService(root, tmp_path / "cache")
    assert service.start().result()
    index = service.keeper.index
    assert index is not None
    assert wait_for(lambda: index.has_view(topic[-1]))  # prepared a second after the index was ready
    service.keeper.pool.submit(lambda: None).result()  # and its commits written
    hs = HistorySettings()
    processes, appended = service.counters.git_processes, service.counters.appended
    assert appended == 2  # the branch's own commits, read ahead
    git(root, "checkout", "-q", "topic")
    assert (
        [c.hash for c in service.entry("f.txt", hs).view.commits]
        == full_history(root, "f.txt")
        == [
            *topic[::-1],
            *h[3::-1],
        ]
    )
    assert service.counters.git_processes == processes and service.counters.appended == appended
    git(root, "checkout", "-q", "main")
    assert [c.hash for c in service.entry("f.txt", hs).view.commits] == h[::-1]
    service.close()
