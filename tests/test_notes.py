"""Commit summaries shared through git notes (DESIGN §11): two clones and a bare remote, the real server, the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from nagent_lsp.history.git import GitRepository
from nagent_lsp.history.summary_notes import NOTES_REF, SummaryNotes, merge_entries
from tests.harness.gitrepo import Commit, build_repo, git, git_env
from tests.harness.lsp import repository_settings, server_env
from tests.test_history_lsp import poll, summarising_responder

SHARED = {"history": {"summarize": True, "shareSummaries": "notes"}}


def summarised(result: dict) -> bool:
    return bool(result["commits"]) and all("summary" in c for c in result["commits"])


def team(tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
    """A bare remote and two clones of it: (remote, a, b, commit hashes)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a = tmp_path / "a"
    hashes = build_repo(
        a,
        [
            Commit("start", {"app.py": "a\n", "util.py": "u\n"}),
            Commit("change app", {"app.py": "b\n"}),
            Commit("change both", {"app.py": "c\n", "util.py": "v\n"}),
        ],
    )
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "main")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(b))
    return remote, a, b, hashes


def cli(folder: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    extra = {**git_env(), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=folder,
        env=server_env(home, extra),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_notes_merge_keeps_every_entry_of_both_clones(tmp_path: Path) -> None:
    _, a, b, h = team(tmp_path)
    mine, theirs = SummaryNotes(GitRepository(a)), SummaryNotes(GitRepository(b))
    assert mine.add({(h[0], "app.py"): "A: start", (h[2], "app.py"): "A: both"}) == 2
    assert mine.add({(h[0], "app.py"): "ignored: already there", (h[0], "util.py"): "A: util"}) == 1
    assert mine.push("origin") == (True, None)
    assert theirs.add({(h[2], "util.py"): "B: util", (h[2], "app.py"): "B: both"}) == 2
    pushed, merged = theirs.push("origin")  # the remote moved on: B merges A's notes first
    assert pushed and merged is not None and merged.moved
    report = mine.fetch("origin")
    assert report.moved
    expected = {
        h[0]: {"app.py": "A: start", "util.py": "A: util"},
        h[2]: {"app.py": merge_entries({"app.py": "A: both"}, {"app.py": "B: both"})["app.py"], "util.py": "B: util"},
    }
    assert mine.read() == expected and theirs.read() == expected  # both clones agree, nothing dropped
    assert mine.fetch("origin").moved is False  # nothing new: no merge commit back and forth
    note = git(a, "notes", f"--ref={NOTES_REF}", "show", h[0])
    assert json.loads(note) == {"app.py": "A: start", "util.py": "A: util"}


async def test_summaries_go_through_notes_between_two_clones(tmp_path, editors, fake_model, isolated_home) -> None:
    _, a, b, h = team(tmp_path)
    # Sharing is the user's consent (their editor's settings here), never a repository's config (DESIGN §12).
    fake_model.responder = summarising_responder
    async with editors.open("vscode", a, model=True, init_options=SHARED) as editor:
        uri = (a / "app.py").resolve().as_uri()
        result = await poll(lambda: editor.command("nagent.history", {"uri": uri}), summarised)
    assert [c.get("summary") for c in result["commits"]] == [f"Model says {x[:7]} touched app.py." for x in h[::-1]]
    notes = SummaryNotes(GitRepository(a))
    # the notes are written just after the cache: wait for the last batch's write
    await poll(lambda: asyncio.to_thread(notes.read), lambda read: len(read) == 3)
    assert json.loads(git(a, "notes", f"--ref={NOTES_REF}", "show", h[1])) == {
        "app.py": f"Model says {h[1][:7]} touched app.py."
    }
    pushed = cli(a, isolated_home, "summaries", "push")
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed to origin" in pushed.stdout
    fetched = cli(b, isolated_home, "summaries", "fetch", "origin")
    assert fetched.returncode == 0, fetched.stderr
    assert "3 new summaries" in fetched.stdout

    fake_model.reset()  # B's server must not ask the model: the notes have every summary
    async with editors.open("eglot", b, model=True, init_options=SHARED) as editor:
        uri = (b / "app.py").resolve().as_uri()
        result = await poll(lambda: editor.command("nagent.history", {"uri": uri}), summarised)
    assert [c.get("summary") for c in result["commits"]] == [f"Model says {x[:7]} touched app.py." for x in h[::-1]]
    assert fake_model.chat_requests == []


def test_warm_states_the_cost_asks_and_summarises_with_a_progress_bar(tmp_path, fake_model, isolated_home) -> None:
    _, a, _, h = team(tmp_path)
    user_sharing(isolated_home)  # the user's consent: a repository's config cannot turn sharing on
    fake_model.responder = summarising_responder
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": "sk-test", "NAGENT_MODEL": "fake-model"}
    refused = cli(a, isolated_home, "summaries", "warm", "app.py", "util.py", env=env)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert "5 commit(s) of 2 file(s) have no summary" in refused.stdout and "tokens" in refused.stdout
    assert fake_model.chat_requests == []  # nothing spent before the answer
    done = cli(a, isolated_home, "summaries", "warm", "app.py", "util.py", "--max-commits", "10", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "summarised 5 of 5 commit(s) and written to git notes" in done.stdout
    assert "[##############################] 5/5 commits" in done.stderr
    notes = SummaryNotes(GitRepository(a)).read()
    assert notes[h[2]] == {
        "app.py": f"Model says {h[2][:7]} touched app.py.",
        "util.py": f"Model says {h[2][:7]} touched util.py.",
    }
    again = cli(a, isolated_home, "summaries", "warm", "app.py", "--yes", env=env)
    assert again.returncode == 0 and "already has a summary" in again.stdout


def test_warm_summarises_past_the_first_page_and_a_teammates_cli_shows_them_for_free(
    tmp_path, fake_model, isolated_home
) -> None:
    # More commits than the per-file first page (50) answered before the index exists: warm must not stop there.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a = tmp_path / "a"
    build_repo(a, [Commit(f"step {i}", {"app.py": f"{i}\n"}) for i in range(60)])
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "main")
    user_sharing(isolated_home)
    fake_model.responder = summarising_responder
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": "sk-test", "NAGENT_MODEL": "fake-model"}
    done = cli(a, isolated_home, "summaries", "warm", "app.py", "--max-commits", "60", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "summarised 60 of 60 commit(s) and written to git notes" in done.stdout
    assert cli(a, isolated_home, "summaries", "push", env=env).returncode == 0
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(b))
    assert cli(b, isolated_home, "summaries", "fetch", env=env).returncode == 0
    spent = len(fake_model.chat_requests)
    shown = cli(b, isolated_home, "history", "app.py", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    commits = json.loads(shown.stdout)["commits"]
    assert commits and all(c["summary"] == f"Model says {c['hash'][:7]} touched app.py." for c in commits)
    assert len(fake_model.chat_requests) == spent  # read from the notes, not paid for again


def user_sharing(home: Path) -> None:
    user_config = home / ".nagent" / "config.json"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text(json.dumps(SHARED), encoding="utf-8")


async def test_a_repository_config_cannot_turn_sharing_on(tmp_path, editors, fake_model) -> None:
    """Sharing pushes summaries to the team's remote: the user's consent, not a clone's config."""
    _, a, _, h = team(tmp_path)
    repository_settings(a, SHARED)
    fake_model.responder = summarising_responder
    async with editors.open("vscode", a, model=True) as editor:
        status = await editor.command("nagent.status")
        uri = (a / "app.py").resolve().as_uri()
        await poll(lambda: editor.command("nagent.history", {"uri": uri}), summarised)
    assert status["settings"]["history"]["shareSummaries"] == "off"
    assert SummaryNotes(GitRepository(a)).read() == {}  # summarised, cached, but nothing went into git notes


def test_lookups_list_the_notes_tree_once_per_tip(tmp_path: Path) -> None:
    _, a, _, h = team(tmp_path)
    git_a = GitRepository(a)
    listed: list[str] = []
    original = git_a.notes_list
    git_a.notes_list = lambda rev: listed.append(rev) or original(rev)  # type: ignore[method-assign]
    notes = SummaryNotes(git_a)
    notes.add({(h[0], "app.py"): "start"})
    for _ in range(3):  # hovers of files whose commits the notes lack: the tree is not listed again
        assert notes.lookup([(h[0], "app.py"), (h[1], "app.py")]) == {(h[0], "app.py"): "start"}
    assert len(listed) == 1
    notes.add({(h[1], "app.py"): "change"})  # the tip moved: read again, and the new note is seen
    assert notes.lookup([(h[1], "app.py")]) == {(h[1], "app.py"): "change"}
    assert len(listed) == 2
