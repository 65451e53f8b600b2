"""History through the protocol: nagent.history, nagent.coedits and the hover card, against the real server,
real git repositories and the fake OpenAI server (for commit summaries)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.fake_openai import FakeOpenAI
from tests.harness.gitrepo import Commit, add_commit, build_repo
from tests.harness.lsp import open_editor, repository_settings

ANN = dict(author="Ann Lee", email="ann@example.com")
BOB = dict(author="Bob Ray", email="bob@example.com")


def make_story(root: Path) -> list[str]:
    return build_repo(
        root,
        [
            Commit("start", {"app.py": "a\nb\nc\n", "util.py": "u1\n", "notes.md": "n\n"}, **ANN),
            Commit("app and util", {"app.py": "a\nB\nc\n", "util.py": "u2\n"}, **BOB),
            Commit("move app", renames={"app.py": "src/app.py"}, **ANN),
            Commit("bulk", {"src/app.py": "a\nB\nc\nd\n", **{f"gen/{i}.txt": f"{i}\n" for i in range(4)}}, **BOB),
            Commit("app util notes", {"src/app.py": "a\nB\nC\nd\n", "util.py": "u3\n", "notes.md": "n2\n"}, **ANN),
        ],
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("lsp-story") / "repo"
    return root, make_story(root)


@pytest.fixture
def repo(template, tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "repo"
    shutil.copytree(template[0], root, symlinks=True)
    return root, list(template[1])


def summarising_responder(request) -> dict:
    """Answer a summary request with one line per (commit, path) found in the prompt."""
    prompt = request.messages[-1]["content"]
    rows = [
        {"commit": sha, "path": path, "summary": f"Model says {sha[:7]} touched {path}."}
        for sha, path in re.findall(r"Commit: ([0-9a-f]{40})\nPath: (.+)", prompt)
    ]
    return {"text": json.dumps({"summaries": rows})}


async def poll(fetch, check, timeout: float = 60.0):
    """Fetch until `check` passes; the timeout only bounds a test that is failing (callers assert afterwards)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await fetch()
        if check(value) or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


SETTINGS = {"history": {"maxChangesetFiles": 4}}


def asked_pairs(requests) -> list[tuple[str, str]]:
    """The (commit, path) pairs the model was asked to summarise, in order."""
    pattern = re.compile(r"Commit: ([0-9a-f]{40})\nPath: (.+)")
    return [pair for r in requests for pair in pattern.findall(r.messages[-1]["content"])]


async def test_history_and_coedits_commands(profile: str, repo, editors, tmp_path: Path) -> None:
    root, h = repo
    repository_settings(root, SETTINGS)
    async with editors.open(profile, root) as editor:
        uri = (root / "src" / "app.py").resolve().as_uri()
        result = await editor.command("nagent.history", {"uri": uri})
        assert [c["hash"] for c in result["commits"]] == [h[4], h[3], h[2], h[1], h[0]]  # across the rename
        assert [c["path"] for c in result["commits"]] == ["src/app.py"] * 3 + ["app.py"] * 2  # its name in each
        assert result["file"] == "src/app.py"
        assert result["authors"] == [
            {"name": "Ann Lee", "email": "ann@example.com", "commits": 3},
            {"name": "Bob Ray", "email": "bob@example.com", "commits": 2},
        ]
        # "bulk" (5 files) is over the cap of 4; app.py is the file's own former name, never a co-edit
        assert result["coedits"] == [
            {"path": "util.py", "count": 3, "rate": 0.75, "level": "high"},
            {"path": "notes.md", "count": 2, "rate": 0.5, "level": "high"},
        ]
        assert "summary" not in result["commits"][0]  # no model configured
        co = await editor.command("nagent.coedits", {"uri": uri, "limit": 1})
        assert co == {"file": "src/app.py", "commits": 4, "rows": [result["coedits"][0]]}
        assert len((await editor.command("nagent.history", {"uri": uri, "maxCommits": 2}))["commits"]) == 2

        bad = await editor.command_error("nagent.history", {"uri": uri, "maxCommits": "many"})
        assert bad.code == -32602 and "maxCommits" in bad.message
        missing = await editor.command_error("nagent.coedits", {})
        assert missing.code == -32602 and "uri" in missing.message
        loose = tmp_path / "elsewhere" / "x.txt"
        loose.parent.mkdir()
        loose.write_text("x\n")
        outside = await editor.command_error("nagent.history", {"uri": loose.as_uri()})
        # DESIGN §12: history reads follow the read rules; a file outside the workspace is refused, naming the field
        assert outside.code == -32602 and "uri" in outside.message and "outside the workspace" in outside.message
        assert await editor.hover(loose, 0) is None  # no card, no error


async def test_hover_card_new_commit_and_summaries_once_across_restart(repo, isolated_home: Path) -> None:
    root, h = repo
    target = root / "src" / "app.py"
    with FakeOpenAI(responder=summarising_responder) as fake:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url}
        async with open_editor("vscode", root, isolated_home, env=env, init_options=SETTINGS) as editor:
            editor.open(target)

            async def card() -> str:
                hover = await editor.hover(target, 1)
                return hover.contents.value if hover else ""

            text = await poll(card, lambda t: "**Line 2** last changed" in t and "Model says" in t)
            assert "5 commits by 2 authors" in text
            assert "Ann Lee (3), Bob Ray (2)" in text
            assert f"`{h[4][:7]}` Ann Lee: Model says {h[4][:7]} touched src/app.py." in text  # last change
            assert f"**Line 2** last changed 2024-01-02 `{h[1][:7]}` Bob Ray: Model says {h[1][:7]}" in text
            assert "`util.py` high (75%)" in text
            asked = asked_pairs(fake.chat_requests)
            assert sorted(asked) == sorted(
                [(h[4], "src/app.py"), (h[3], "src/app.py"), (h[2], "src/app.py"), (h[1], "app.py"), (h[0], "app.py")]
            )

            sha = add_commit(root, Commit("fresh work", {"src/app.py": "z\n"}, **BOB))
            text = await poll(card, lambda t: sha[:7] in t and "Model says " + sha[:7] in t)
            assert "6 commits" in text and f"`{sha[:7]}` Bob Ray: Model says {sha[:7]}" in text
            requests_before_restart = len(fake.chat_requests)
            assert len(asked_pairs(fake.chat_requests)) == 6  # every (commit, path) once

        # a restarted server reads the summaries from cache/ and never asks again
        async with open_editor("neovim", root, isolated_home, env=env, init_options=SETTINGS) as editor:
            result = await editor.command("nagent.history", {"uri": target.resolve().as_uri()})
            assert all(c["summary"].startswith("Model says") for c in result["commits"])
            hover = await editor.hover(target, 0)
            assert "Model says" in hover.contents.value
            # A (wrong) request for a cached summary would have been queued by now; summaries are asked one
            # batch after another, so once a new commit's summary is in, any such request has been sent.
            later = add_commit(root, Commit("later work", {"src/app.py": "y\n"}, **ANN))

            async def card() -> str:
                hover = await editor.hover(target, 0)
                return hover.contents.value if hover else ""

            text = await poll(card, lambda t: "Model says " + later[:7] in t)
            assert f"`{later[:7]}` Ann Lee: Model says {later[:7]}" in text
            assert asked_pairs(fake.chat_requests[requests_before_restart:]) == [(later, "src/app.py")]


async def test_a_head_naming_a_missing_commit_is_said_not_shown_as_no_commits(repo, isolated_home: Path) -> None:
    """A branch whose ref names a commit the repository lacks (a broken copy, a failed fetch): the card, the
    command and the CLI say git could not read the history (they said "no commits yet"); once the ref is mended,
    the next hover shows the history (the failure was not kept)."""
    root, h = repo
    target = root / "src" / "app.py"
    ref = subprocess.run(["git", "symbolic-ref", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    loose = root / ".git" / ref.stdout.strip()
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_text("0123456789" * 4 + "\n", encoding="ascii")
    for command in ("history", "coedits"):
        cli = subprocess.run(
            [sys.executable, "-m", "nagent_lsp", command, "src/app.py"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 1 and "cannot read the history of src/app.py" in cli.stderr, cli
        assert "bad object" in cli.stderr and "Traceback" not in cli.stderr and not cli.stdout
    async with open_editor("eglot", root, isolated_home) as editor:
        editor.open(target)

        async def card() -> str:
            hover = await editor.hover(target, 0)
            return hover.contents.value if hover else ""

        text = await poll(card, lambda t: "git could not read it" in t)
        assert "**History of `src/app.py`**: git could not read it:" in text and "bad object" in text, text
        failed = await editor.command_error("nagent.history", {"uri": target.resolve().as_uri()})
        assert "cannot read the history of src/app.py" in failed.message and "bad object" in failed.message
        assert (await editor.command("nagent.status", {}))["version"]

        loose.write_text(h[4] + "\n", encoding="ascii")
        text = await poll(card, lambda t: "5 commits" in t)
        assert "5 commits by 2 authors" in text, text
