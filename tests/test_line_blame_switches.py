"""Line blame across branch switches (issue 29): a HEAD move blames nothing by itself, a file is blamed only when
asked at the new HEAD and only when no kept blame is still exact there, a switch back and forth reuses what was
kept, and what is kept stays bounded. Real git repositories with branches; counts from the service's counters."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history import line_blame
from nagent_lsp.history.blame import parse_porcelain
from nagent_lsp.history.git import GitRepository
from nagent_lsp.history.service import HistoryService
from tests.harness.gitrepo import Commit, add_commit, build_repo, git
from tests.harness.lsp import open_editor

ANN = dict(author="Ann Lee", email="ann@example.com")
BOB = dict(author="Bob Ray", email="bob@example.com")
HS = HistorySettings()


def branchy(root: Path) -> dict[str, str]:
    """main: f.txt in two commits, g.txt and h.txt once; `other` (from the first commit) rewrites f.txt's line 2."""
    made = build_repo(
        root,
        [
            Commit("start", {"f.txt": "one\ntwo\nthree\n", "g.txt": "g\n", "h.txt": "h\n"}, **ANN),
            Commit("other: f", {"f.txt": "one\nTWO\nthree\n"}, branch="other", **BOB),
            Commit("main: f", {"f.txt": "one\ntwo\nthree\nfour\n"}, branch="main", **ANN),
        ],
    )
    return dict(zip(["start", "other", "main"], made, strict=True))


def real_blame(root: Path, rel: str) -> list[str]:
    return parse_porcelain(git(root, "blame", "--porcelain", "HEAD", "--", rel).encode())


def checkout(root: Path, branch: str) -> None:
    git(root, "checkout", "-q", branch)


def asked(service: HistoryService, rel: str, line: int) -> str | None:
    """What a hover asks: the file's entry at HEAD (no waiting for git), then its line's commit, then the blame's
    end waited for; the line's commit hash once it is known."""
    entry = service.entry(rel, HS, sync=False, wait=0.0)
    assert entry is not None
    service.line_commit(rel, line, entry)
    assert service.wait_blame(rel, 60)
    entry = service.entry(rel, HS, sync=False, wait=0.0)
    assert entry is not None
    commit, _state = service.line_commit(rel, line, entry)
    return commit.hash if commit is not None else None


def drain_blames(service: HistoryService) -> None:
    """Every blame job submitted so far has ended (the blame pool runs one job at a time, in order)."""
    service.blame.pool.submit(lambda: None).result(60)


def test_switching_back_and_forth_reuses_blames_and_keeps_them_bounded(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    h = branchy(root)
    service = HistoryService(root, tmp_path / "cache")
    assert service.start().result()
    assert asked(service, "f.txt", 2) == h["start"]
    assert service.counters.blame_runs == 1

    checkout(root, "other")
    assert asked(service, "f.txt", 2) == h["other"]  # the line as the other branch has it
    assert [asked(service, "f.txt", n) for n in (1, 2, 3)] == real_blame(root, "f.txt")
    assert service.counters.blame_runs == 2  # f.txt differs there: blamed once
    first = service.blame_stats()

    for _ in range(10):
        checkout(root, "main")
        assert asked(service, "f.txt", 2) == h["start"]
        assert asked(service, "f.txt", 4) == h["main"]
        checkout(root, "other")
        assert asked(service, "f.txt", 2) == h["other"]
    assert service.counters.blame_runs == 2  # every later switch reused a kept blame
    assert service.blame_stats() == first  # nothing more kept: one file, two HEADs, two blames
    assert first["files"] == 1 and first["blames"] == 2 and first["pending"] == 0
    assert first["bytes"] <= line_blame.BLAME_BYTES
    service.close()


def test_a_switch_blames_no_file_nobody_asks_about(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    branchy(root)
    service = HistoryService(root, tmp_path / "cache")
    assert service.start().result()
    asked(service, "f.txt", 1)
    asked(service, "g.txt", 1)
    runs = service.counters.blame_runs
    for branch in ("other", "main", "other"):
        checkout(root, branch)
        assert service.refresh()  # the index follows HEAD
    drain_blames(service)
    assert service.counters.blame_runs == runs  # nobody hovered: no blame
    assert service.blame_stats()["pending"] == 0
    asked(service, "g.txt", 1)  # g.txt is the same on both branches: its kept blame is still exact
    assert service.counters.blame_runs == runs
    service.close()


class GatedGit(GitRepository):
    """The index's incremental update (`git log --not <tips>`) waits for `gate` while `closed` is set."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.gate = threading.Event()
        self.closed = False

    def log_all(self, revision="HEAD", exclude=()):
        if self.closed and exclude:
            assert self.gate.wait(60), "the test never opened the gate"
        return super().log_all(revision, exclude)


def test_a_blame_asked_before_the_index_reaches_head_waits_for_it_and_carries(tmp_path: Path) -> None:
    """A hover right after HEAD moved, before the index update lands: the blame job waits for the update, then
    carries the kept blame (the file did not change) instead of running git blame."""
    root = tmp_path / "repo"
    h = branchy(root)
    gated = GatedGit(root)
    service = HistoryService(root, tmp_path / "cache", git=gated)
    assert service.start().result()
    assert asked(service, "g.txt", 1) == h["start"]
    runs = service.counters.blame_runs

    gated.closed = True
    newer = add_commit(root, Commit("h only", {"h.txt": "h2\n"}, **BOB))  # g.txt unchanged
    entry = service.entry("g.txt", HS, sync=False, wait=0.0)
    assert entry is not None and entry.partial  # the index is held back: a first page answered
    service.line_commit("g.txt", 1, entry)  # the blame job now waits for the index
    gated.gate.set()
    assert service.wait_blame("g.txt", 60)
    assert service.keeper.index is not None and service.keeper.index.head == newer
    assert service.counters.blame_runs == runs  # carried, not blamed again
    assert asked(service, "g.txt", 1) == h["start"]
    service.close()


def test_a_blame_for_a_head_left_before_its_turn_is_not_made(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    branchy(root)
    gated = GatedGit(root)
    service = HistoryService(root, tmp_path / "cache", git=gated)
    assert service.start().result()
    gated.closed = True
    checkout(root, "other")
    add_commit(root, Commit("other: h", {"h.txt": "h3\n"}, branch="other", **BOB))  # a HEAD the index never saw
    entry = service.entry("f.txt", HS, sync=False, wait=0.0)
    assert entry is not None and entry.partial
    service.line_commit("f.txt", 1, entry)
    checkout(root, "main")  # left before the blame's turn
    gated.gate.set()
    drain_blames(service)
    assert service.counters.blame_runs == 0
    assert service.blame_stats()["pending"] == 0
    service.close()


@pytest.mark.parametrize("profile", ["vscode"])
async def test_hover_after_switches_shows_the_line_commit_of_each_branch(
    profile: str, tmp_path: Path, isolated_home: Path
) -> None:
    """Through the protocol: the card's line commit follows the checked-out branch, every switch (the editor
    reloads the buffer from disk, as editors do after a checkout)."""
    root = tmp_path / "repo"
    h = branchy(root)
    target = root / "f.txt"
    async with open_editor(profile, root, isolated_home) as editor:
        editor.open(target)

        async def line_two(expected: str) -> str:
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                hover = await editor.hover(target, 1)
                text = hover.contents.value if hover else ""
                if f"`{expected[:7]}`" in text.split("**Line 2**", 1)[-1] or (
                    asyncio.get_running_loop().time() > deadline
                ):
                    return text
                await asyncio.sleep(0.05)

        for branch, expected in (("main", "start"), ("other", "other"), ("main", "start"), ("other", "other")):
            checkout(root, branch)
            editor.change(target, target.read_text())
            text = await line_two(h[expected])
            assert "**Line 2** last changed" in text
            assert f"`{h[expected][:7]}`" in text.split("**Line 2**", 1)[1]


class GatedBuild(GitRepository):
    """A cold build's whole-history pass waits for `gate`; the order of the pass's end and of blames is recorded."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.gate = threading.Event()
        self.events: list[str] = []

    def log_all(self, revision="HEAD", exclude=()):
        assert self.gate.wait(60), "the test never opened the gate"
        yield from super().log_all(revision, exclude)
        self.events.append("log pass ended")

    def blame(self, *args, **kwargs):
        self.events.append("blame")
        return super().blame(*args, **kwargs)


def test_the_first_hover_blame_waits_for_the_cold_build_then_answers(tmp_path: Path) -> None:
    """The first hover's blame does not compete with a cold build's `git log` pass: it waits for the build, then
    runs, and the hover gets its line."""
    root = tmp_path / "repo"
    h = branchy(root)
    gated = GatedBuild(root)
    service = HistoryService(root, tmp_path / "cache", git=gated)
    build = service.start(build=True)
    entry = service.entry("f.txt", HS, sync=True)  # the first page, while the build waits at its gate
    assert entry is not None and entry.partial
    assert service.line_commit("f.txt", 4, entry) == (None, "finding its last commit…")
    deadline = time.monotonic() + 60
    while service.blame_stats()["deferred"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # until the blame job is waiting for the build (bounded; never what is asserted)
    assert service.blame_stats()["deferred"] == 1
    assert "blame" not in gated.events  # the pass is held at its gate, and so is the blame
    gated.gate.set()
    assert build.result(60)
    assert service.wait_blame("f.txt", 60)
    assert gated.events == ["log pass ended", "blame"]
    assert asked(service, "f.txt", 4) == h["main"]
    service.close()


class GatedBlame(GitRepository):
    """`git blame` waits for `gate` (a blame still running when the next commit lands)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.gate = threading.Event()

    def blame(self, *args, **kwargs):
        assert self.gate.wait(60), "the test never opened the gate"
        return super().blame(*args, **kwargs)


def test_a_commit_made_while_the_last_blame_runs_is_advanced_from_it(tmp_path: Path) -> None:
    """What a blame job does is decided when its turn comes: the blame of the previous HEAD, still running when the
    commit was made and the file hovered again, is by then kept, so the new HEAD's blame is one diff, not a blame."""
    root = tmp_path / "repo"
    branchy(root)
    gated = GatedBlame(root)
    service = HistoryService(root, tmp_path / "cache", git=gated)
    assert service.start().result()
    entry = service.entry("f.txt", HS, sync=False, wait=0.0)
    service.line_commit("f.txt", 1, entry)  # held at the gate
    newer = add_commit(root, Commit("main: f again", {"f.txt": "one\ntwo\nthree\nfour\nfive\n"}, **BOB))
    assert service.refresh()
    entry = service.entry("f.txt", HS, sync=False, wait=0.0)
    assert entry is not None and not entry.partial and entry.view.commits[0].hash == newer
    service.line_commit("f.txt", 5, entry)  # queued behind the first
    gated.gate.set()
    drain_blames(service)
    assert service.counters.blame_runs == 1 and service.counters.blame_advanced == 1
    assert [asked(service, "f.txt", n) for n in range(1, 6)] == real_blame(root, "f.txt")
    service.close()
