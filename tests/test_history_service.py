"""The history workflow against REAL git repositories built by tests/harness/gitrepo.py."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from nagent_lsp.config.convert import to_wire
from nagent_lsp.config.settings import HistorySettings, Settings
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.history.commit_summaries import make_model_summarizer, parse_summary_reply
from nagent_lsp.history.service import HistoryService
from nagent_lsp.operations import history
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs
from nagent_lsp.operations.session import Session
from tests.harness.gitrepo import Commit, add_commit, build_repo, git

ANN = dict(author="Ann Lee", email="ann@example.com")
BOB = dict(author="Bob Ray", email="bob@example.com")
CY = dict(author="Cy Doe", email="cy@example.com")


def story(root: Path) -> dict[str, str]:
    """app.py is renamed to src/app.py half way; util.py usually changes with it; one mass commit; a merge."""
    h = build_repo(
        root,
        [
            Commit(
                "start", {"app.py": "a\nb\nc\n", "util.py": "u1\n", "README.md": "r\n", "old_helper.py": "h\n"}, **ANN
            ),
            Commit("app and util", {"app.py": "a\nB\nc\n", "util.py": "u2\n"}, **BOB),
            Commit("helper only", {"old_helper.py": "h2\n"}, **BOB),
            Commit("move app", renames={"app.py": "src/app.py"}, **ANN),
            Commit("reformat", {"src/app.py": "a\nB\nc\n\n", **{f"gen/f{i}.py": f"{i}\n" for i in range(6)}}, **CY),
            Commit("app util readme", {"src/app.py": "a\nB\nC\n\n", "util.py": "u3\n", "README.md": "r2\n"}, **ANN),
            Commit("topic: helper", {"old_helper.py": "h3\n", "src/app.py": "a\nB\nC\nD\n"}, branch="topic", **BOB),
            Commit("back", branch="main", **ANN),  # an empty commit on main so the merge is a real merge
            Commit("Merge topic", merge="topic", **ANN),
        ],
    )
    names = ["start", "app_util", "helper", "move", "reformat", "app_util_readme", "topic", "back", "merge"]
    return dict(zip(names, h, strict=False))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("story") / "repo"
    return root, story(root)


@pytest.fixture
def repo(template, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A private copy of the story repository (building it once per module keeps the suite fast)."""
    root = tmp_path / "repo"
    shutil.copytree(template[0], root, symlinks=True)
    return root, dict(template[1])


def session_for(root: Path, **history_settings) -> Session:
    s = Session(workspace_folders=[root])
    if history_settings:
        s.settings = Settings(history=HistorySettings(**history_settings))
    return s


def follow(root: Path, rel: str) -> list[str]:
    return git(root, "log", "--follow", "--format=%H", "--", rel).split()


@pytest.mark.parametrize("indexed", [False, True])
def test_exact_commits_across_rename_authors_and_coedits(repo, tmp_path: Path, indexed: bool) -> None:
    root, h = repo
    service = HistoryService(root, tmp_path / "cache")
    if indexed:
        service.start().result()
        assert service.ready
    entry = service.entry("src/app.py", HistorySettings(maxChangesetFiles=5))
    view = entry.view
    expected = [h["topic"], h["app_util_readme"], h["reformat"], h["move"], h["app_util"], h["start"]]
    assert [c.hash for c in view.commits] == expected
    assert set(expected) == set(follow(root, "src/app.py"))  # the same commits git --follow finds
    assert [c.path for c in view.commits][-2:] == ["app.py", "app.py"]
    assert [(a.name, a.commits) for a in view.authors] == [("Ann Lee", 3), ("Bob Ray", 2), ("Cy Doe", 1)]
    # reformat (7 files) is over the cap of 5: not counted, not in the denominator; app.py is its own former name
    rows = {r.path: (r.count, r.level, r.percent) for r in view.coedits.rows}
    assert view.coedits.commits == 5
    assert rows == {"util.py": (3, "high", 60), "README.md": (2, "medium", 40), "old_helper.py": (2, "medium", 40)}
    assert "app.py" not in rows and not any(p.startswith("gen/") for p in rows)
    service.close()


def test_cap_raised_counts_the_mass_commit(repo, tmp_path: Path) -> None:
    root, _ = repo
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    table = service.entry("src/app.py", HistorySettings(maxChangesetFiles=50)).view.coedits
    assert table.commits == 6
    assert {r.path: r.level for r in table.rows}["gen/f0.py"] == "low"  # 1/6 = 17 %
    service.close()


def test_git_blame_ignore_revs_drops_commit_from_coedits(repo, tmp_path: Path) -> None:
    root, h = repo
    (root / ".git-blame-ignore-revs").write_text(f"# noise\n{h['app_util_readme']}\n")
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    table = service.entry("src/app.py", HistorySettings(maxChangesetFiles=5)).view.coedits
    assert table.commits == 4
    assert {r.path: r.count for r in table.rows} == {"util.py": 2, "README.md": 1, "old_helper.py": 2}
    service.close()


def test_contract_results_and_errors(repo, tmp_path: Path) -> None:
    root, h = repo
    s = session_for(root, maxChangesetFiles=5)
    app = (root / "src" / "app.py").as_uri()
    result = to_wire(history.history_result(s, HistoryArgs(app)))  # the JSON on the wire
    assert set(result) == {"file", "repository", "commits", "authors", "coedits", "markdown"}
    assert result["file"] == "src/app.py" and result["repository"] == str(root.resolve())
    first = result["commits"][0]
    assert first["hash"] == h["topic"] and first["short"] == h["topic"][:7] and first["subject"] == "topic: helper"
    assert first["author"] == "Bob Ray" and first["email"] == "bob@example.com"
    assert first["date"].startswith("2024-01-07")
    assert "summary" not in first  # no model configured
    assert result["authors"][0] == {"name": "Ann Lee", "email": "ann@example.com", "commits": 3}
    assert result["coedits"][0] == {"path": "util.py", "count": 3, "rate": 0.6, "level": "high"}
    assert "util.py" in result["markdown"]
    assert len(history.history_result(s, HistoryArgs(app, maxCommits=2)).commits) == 2
    co = to_wire(history.coedits_result(s, CoeditsArgs(app, limit=1)))
    util = {"path": "util.py", "count": 3, "rate": 0.6, "level": "high"}
    assert co == {"file": "src/app.py", "commits": 5, "rows": [util]}
    outside = tmp_path / "loose.txt"
    outside.write_text("x")
    with pytest.raises(InvalidArgument, match="outside the workspace"):  # DESIGN §12: the read rules apply
        history.history_result(s, HistoryArgs(outside.as_uri()))
    assert history.hover_markdown(s, outside, 1) is None
    assert history.file_history_block(s, outside) == ""
    untracked = root / "new.py"
    untracked.write_text("new\n")
    assert history.hover_markdown(s, untracked, 1) is None
    assert history.history_result(s, HistoryArgs(untracked.as_uri())).commits == []


def test_hover_card_blame_line_and_warm_hovers_start_no_git(repo, tmp_path: Path) -> None:
    root, h = repo
    s = session_for(root)
    service, rel = history.service_for(s, root / "src" / "app.py")
    assert service.wait_ready(30)
    card = history.hover_markdown(s, root / "src" / "app.py", 2, blame_wait=30)
    assert "6 commits by 3 authors" in card
    assert "Ann Lee (3), Bob Ray (2), Cy Doe (1)" in card
    assert f"`{h['topic'][:7]}` Bob Ray: topic: helper" in card  # the last change
    assert f"**Line 2** last changed 2024-01-02 `{h['app_util'][:7]}` Bob Ray: app and util" in card
    assert "`util.py` high" in card
    before = service.counters.git_processes
    for line in range(1, 200):
        history.hover_markdown(s, root / "src" / "app.py", line % 5 + 1)
    assert service.counters.git_processes == before  # warm: memory only


def test_new_commit_shows_without_restart_incrementally(repo, tmp_path: Path) -> None:
    root, _ = repo
    s = session_for(root)
    service, _ = history.service_for(s, root / "src" / "app.py")
    assert service.wait_ready(30)
    sha = add_commit(root, Commit("fresh change", {"src/app.py": "z\n", "util.py": "u9\n"}, **CY))
    card = history.hover_markdown(s, root / "src" / "app.py", 1, wait=30)
    # from the updated index, or (a busy machine) from a first page for the new HEAD that won the race
    assert f"`{sha[:7]}` Cy Doe: fresh change" in card and "7 commits" in card
    assert service.refresh()  # the update the hover started, finished
    assert service.counters.builds == 1 and service.counters.incremental == 1
    # a restarted service loads the persisted index (under the new HEAD) instead of rebuilding
    service.keeper.pool.submit(lambda: None).result()  # the persist job queued after the update has run
    again = HistoryService(root, service.cache_dir)
    again.start().result()
    assert again.counters.loads == 1 and again.counters.builds == 0
    assert again.entry("src/app.py", HistorySettings()).view.commits[0].hash == sha


def test_rewritten_history_reuses_the_pool_instead_of_rebuilding(repo, tmp_path: Path) -> None:
    root, h = repo
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    git(root, "reset", "-q", "--hard", h["move"])
    sha = add_commit(root, Commit("other line", {"src/app.py": "q\n"}, **BOB))
    assert service.refresh()
    view = service.entry("src/app.py", HistorySettings()).view
    assert [c.hash for c in view.commits] == [sha, h["move"], h["app_util"], h["start"]]
    assert service.counters.builds == 1 and service.counters.appended == 1  # only the new commit was read
    # back to the old tip: everything is in the pool already, no git log at all
    git(root, "reset", "-q", "--hard", h["merge"])
    before = service.counters.git_processes
    assert service.refresh()
    view = service.entry("src/app.py", HistorySettings()).view
    assert view.commits[0].hash == h["topic"] and len(view.commits) == 6
    assert service.counters.git_processes == before and service.counters.builds == 1
    service.close()


class CountingSummarizer:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []
        self.lock = threading.Lock()

    def __call__(self, items):
        with self.lock:
            self.calls.append([(sha, path) for sha, path, _s, _d in items])
        for _sha, _path, _subject, diff in items:
            assert diff  # the diff excerpt reached the model
        return {(sha, path): f"summary of {subject} in {path}" for sha, path, subject, _d in items}


def test_summaries_requested_once_across_restart(repo, tmp_path: Path) -> None:
    root, h = repo
    cache = tmp_path / "cache"
    fake = CountingSummarizer()
    hs = HistorySettings()
    service = HistoryService(root, cache, summarizer=fake)
    service.start().result()
    entry = service.entry("src/app.py", hs)
    service.request_summaries(entry, hs).result()
    assert sorted(fake.calls[0]) == sorted((c.hash, c.path) for c in entry.view.commits)
    assert len(fake.calls) == 1
    assert service.request_summaries(entry, hs) is None  # nothing missing any more
    service.close()
    # "restart": a fresh service over the same cache folder
    again = HistoryService(root, cache, summarizer=fake)
    again.start().result()
    entry = again.entry("src/app.py", hs)
    assert again.request_summaries(entry, hs) is None and len(fake.calls) == 1
    assert entry.view.text_for(entry.view.commits[-1]) == "summary of start in app.py"  # keyed by the old name
    # switched off: never asked
    off = HistorySettings(summarize=False)
    add_commit(root, Commit("late", {"src/app.py": "late\n"}, **ANN))
    assert again.request_summaries(again.entry("src/app.py", off), off) is None
    again.close()


def test_summary_failure_leaves_subjects_and_is_not_retried_in_session(repo, tmp_path: Path) -> None:
    root, _ = repo
    calls = []

    def broken(items):
        calls.append(items)
        raise RuntimeError("model down")

    service = HistoryService(root, tmp_path / "cache", summarizer=broken)
    service.start().result()
    hs = HistorySettings()
    entry = service.entry("util.py", hs)
    service.request_summaries(entry, hs).result()
    assert service.request_summaries(entry, hs) is None and len(calls) == 1
    assert entry.view.text_for(entry.view.commits[0]) == entry.view.commits[0].subject
    service.close()


def test_model_summarizer_prompt_and_reply_parsing() -> None:
    items = [("a" * 40, "f.py", "fix it", "diff --git a/f.py"), ("b" * 40, "f.py", "add", "")]
    seen = []

    def complete(messages):
        seen.append(messages)
        return (
            '```json\n{"summaries": [{"commit": "' + "a" * 40 + '", "path": "f.py", "summary": "Fixed  it."},'
            '{"commit": "bbbbbbb", "summary": "Added f."}, {"commit": "cccccccc", "summary": "x"}]}\n```'
        )

    out = make_model_summarizer(complete)(items)
    assert out == {("a" * 40, "f.py"): "Fixed it.", ("b" * 40, "f.py"): "Added f."}
    assert seen[0][0].role == "system" and "a" * 40 in seen[0][1].content and "(not available)" in seen[0][1].content
    assert parse_summary_reply("no json here", items) == {}


def test_file_history_block_and_cli_text(repo, tmp_path: Path) -> None:
    root, h = repo
    s = session_for(root, maxChangesetFiles=5)
    block = history.file_history_block(s, root / "src" / "app.py")
    assert block.startswith("{file-history}\nFile: src/app.py\n")
    assert "- Ann Lee <ann@example.com>: 3 commits" in block
    steps = block.split("History, oldest first:\n")[1].split("\n\n")[0].splitlines()
    assert steps[0].endswith("Ann Lee: start") and steps[-1].endswith("Bob Ray: topic: helper")
    assert "| util.py | 3 | high (60%) |" in block
    assert f"- {h['topic']} ({h['topic'][:7]}): topic: helper" in block
    app = (root / "src" / "app.py").as_uri()
    text = history.render_history_text(history.history_result(session_for(root), HistoryArgs(app), background=False))
    assert "src/app.py" in text and "3  Ann Lee <ann@example.com>" in text and "util.py" in text
    five = session_for(root, maxChangesetFiles=5)
    table = history.render_coedits_text(history.coedits_result(five, CoeditsArgs(app), background=False))
    assert "over 5 commits" in table and "util.py" in table and "high" in table


def test_merge_commits_are_not_file_history(repo, tmp_path: Path) -> None:
    root, h = repo
    service = HistoryService(root, tmp_path / "cache")
    service.start().result()
    for rel in ("src/app.py", "old_helper.py"):
        hashes = [c.hash for c in service.entry(rel, HistorySettings()).view.commits]
        assert h["merge"] not in hashes
        assert (
            hashes
            == git(
                root,
                "log",
                "--full-history",
                "--no-merges",
                "--format=%H",
                "--",
                rel,
                *(["app.py"] if rel == "src/app.py" else []),
            ).split()
        )
    service.close()


def test_block_reuses_the_sessions_service(repo) -> None:
    root, _ = repo
    s = Session(workspace_folders=[root])
    s.reload()
    first = history.file_history_block(s, root / "util.py")
    assert first.startswith("{file-history}\nFile: util.py\n")
    services = list(s.history_services.values())
    assert len(services) == 1 and services[0].wait_ready(30)
    block = history.file_history_block(s, root / "util.py")
    assert "`src/app.py`" not in block and "| src/app.py | 3 |" in block  # a partner under its current name
    assert list(s.history_services.values()) == services  # the same service, not a new build
    assert services[0].counters.builds == 1
    for service in services:
        service.close()


@pytest.mark.parametrize("indexed", [False, True])
def test_a_renamed_coedited_file_is_listed_once(tmp_path: Path, indexed: bool) -> None:
    # util.py becomes lib/util.py in a commit that does not touch app.py: before the index, app.py's own commits
    # cannot tell that the two names are one file, so the old name (absent from the work tree) is left out rather
    # than listed twice; the index knows the rename and counts every co-edit under the current name.
    root = tmp_path / "repo"
    build_repo(
        root,
        [
            Commit("start", {"app.py": "a\n", "util.py": "u1\n"}),
            Commit("both", {"app.py": "b\n", "util.py": "u2\n"}),
            Commit("move util", renames={"util.py": "lib/util.py"}),
            Commit("both again", {"app.py": "c\n", "lib/util.py": "u3\n"}),
        ],
    )
    service = HistoryService(root, tmp_path / "cache")
    if indexed:
        service.start().result()
    rows = {r.path: r.count for r in service.entry("app.py", HistorySettings()).view.coedits.rows}
    assert rows == ({"lib/util.py": 3} if indexed else {"lib/util.py": 1})
    service.close()
