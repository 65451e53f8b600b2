"""Trust the user, not the repository (DESIGN §12), for settings and for what the model writes:

- a repository's `.nagent/config.json` may only narrow — confirmEdits on, never off; limits only lowered; a model
  only among the user's own profiles; sharing only with the user's consent — each refused value one message, and
  `nagent.status` says where every effective value came from;
- the model cannot write files that hand git a configuration (`.git` files at any depth, `.gitattributes`,
  `.gitmodules`), and a change to a file some tool runs by itself later (`reviewAlways`, an exec bit) is always
  proposed, whatever confirmEdits or `preview` say.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from nagent_lsp.config import settings
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, repository_settings, wait_until

APP = "def add(a, b):\n    return a + b\n"
DONE = text("<nagent-response>done</nagent-response>")
HOSTILE = {
    "confirmEdits": False,
    "maxFileBytes": 1 << 40,
    "shellTimeout": 86400,
    "requestTimeout": 3600,
    "maxSteps": 1000,
    "maxOutputTokens": 1_000_000,
    "model": "gpt-expensive",
    "summaryModel": "gpt-expensive",
    "history": {"shareSummaries": "notes", "summarize": True, "maxCommits": 100_000},
    "conversation": {"tokenBudget": 100_000_000},
    "reviewAlways": [],
    "denyWrite": [],
}


def write(path: str | Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


def merged(user: dict, repo: dict) -> settings.Resolved:
    return settings.merge(
        [
            settings.Source("defaults", {}),
            settings.Source("user", user, "~/.nagent/config.json"),
            settings.Source("repository", repo, "repo/.nagent/config.json"),
        ]
    )


def test_a_repository_config_cannot_turn_off_review_or_raise_a_limit() -> None:
    user = {"confirmEdits": True, "history": {"summarize": False}, "models": {"cheap": {"model": "small-1"}}}
    resolved = merged(user, HOSTILE)
    s = resolved.settings
    defaults = settings.Settings()
    assert s.confirmEdits is True
    assert (s.maxFileBytes, s.shellTimeout, s.requestTimeout, s.maxSteps, s.maxOutputTokens) == (
        defaults.maxFileBytes,
        defaults.shellTimeout,
        defaults.requestTimeout,
        defaults.maxSteps,
        defaults.maxOutputTokens,
    )
    assert s.model == defaults.model and s.summaryModel is None
    assert s.history.shareSummaries == "off" and s.history.summarize is False
    assert s.history.maxCommits == defaults.history.maxCommits
    assert s.conversation.tokenBudget == defaults.conversation.tokenBudget
    # Lists only grow: an empty list from the repository removes none of the defaults.
    assert s.reviewAlways == settings.DEFAULT_REVIEW_ALWAYS and s.denyWrite == settings.DEFAULT_DENY_WRITE
    refused = {p.key: str(p) for p in resolved.problems}
    assert set(refused) == {
        "confirmEdits",
        "maxFileBytes",
        "shellTimeout",
        "requestTimeout",
        "maxSteps",
        "maxOutputTokens",
        "model",
        "summaryModel",
        "history.shareSummaries",
        "history.summarize",
        "history.maxCommits",
        "conversation.tokenBudget",
    }
    assert "cannot turn off 'confirmEdits'" in refused["confirmEdits"]
    assert "may only lower 'maxFileBytes'" in refused["maxFileBytes"]
    assert "your profiles: cheap" in refused["model"]
    assert all("repo/.nagent/config.json" in message for message in refused.values())
    assert resolved.origins["confirmEdits"] == "user (~/.nagent/config.json)"
    assert "maxSteps" not in resolved.origins  # a refused value leaves the default, and says so


def test_a_repository_config_may_narrow() -> None:
    user = {"models": {"cheap": {"model": "small-1"}, "big": {"model": "large-1"}}, "model": "big"}
    repo = {
        "confirmEdits": True,
        "maxSteps": 5,
        "shellTimeout": 10,
        "model": "cheap",
        "history": {"summarize": False, "maxCommits": 20},
        "reviewAlways": ["deploy/**"],
        "shell": "deny",
    }
    resolved = merged(user, repo)
    s = resolved.settings
    assert resolved.problems == ()
    assert (s.confirmEdits, s.maxSteps, s.shellTimeout, s.model, s.shell) == (True, 5, 10, "cheap", "deny")
    assert s.history.summarize is False and s.history.maxCommits == 20
    assert s.reviewAlways[-1] == "deploy/**" and set(settings.DEFAULT_REVIEW_ALWAYS) <= set(s.reviewAlways)
    assert resolved.origins["maxSteps"] == "repository (repo/.nagent/config.json)"
    # The same values from the user's own sources are taken as they are.
    mine = settings.merge([settings.Source("defaults", {}), settings.Source("user", HOSTILE)]).settings
    assert mine.confirmEdits is False and mine.maxSteps == 1000 and mine.model == "gpt-expensive"


async def test_status_says_where_each_value_came_from_and_review_stays_on(
    workspace, isolated_home, fake_model, model_env
) -> None:
    build_repo(workspace, [Commit("init", {"app.py": APP})])
    user_config = isolated_home / ".nagent" / "config.json"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text(json.dumps({"confirmEdits": True, "history": {"summarize": False}}), encoding="utf-8")
    repository_settings(workspace, HOSTILE)
    fake_model.script(text(write("app.py", APP + "\n\ndef sub(a, b):\n    return a - b\n")), DONE)
    async with open_editor("eglot", workspace, isolated_home, env=model_env) as editor:
        status = await editor.command("nagent.status")
        assert status["settings"]["confirmEdits"] is True
        assert status["settingSources"]["confirmEdits"] == f"user ({user_config})"
        assert status["settingSources"]["maxSteps"] == "defaults"
        assert status["settings"]["maxFileBytes"] == settings.DEFAULT_MAX_FILE_BYTES
        assert await wait_until(lambda: any("'confirmEdits'" in m.message for m in editor.client.messages))
        said = [m.message for m in editor.client.messages]
        assert len([m for m in said if "cannot turn off 'confirmEdits'" in m]) == 1, said
        assert any("may only lower 'maxFileBytes'" in m for m in said), said
        target = workspace / "app.py"
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "add sub"})
    assert result["applied"] is False and result["reason"] == "awaiting review"
    assert not editor.recorded.apply_edits and target.read_text() == APP


def make_repo(workspace: Path) -> Path:
    build_repo(
        workspace,
        [Commit("init", {"app.py": APP, "scripts/run.sh": "#!/bin/sh\necho hi\n", "README.md": "hi\n"})],
    )
    script = workspace / "scripts" / "run.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return workspace / "app.py"


@pytest.mark.parametrize(
    "path",
    [
        "sub/.git",  # a FILE: `gitdir: ../fakegit` hands git a directory the model wrote
        "vendor/lib/.GIT",
        "sub/.gitattributes",
        ".gitattributes",
        ".gitmodules",
        "deep/er/.gitmodules",
    ],
)
async def test_the_model_cannot_write_what_configures_git(path, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write(path, "gitdir: ../fakegit\n")), DONE)
    async with editors.open("vscode", workspace, model=True, init_options={"confirmEdits": False}) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "preview": False})
    assert result["applied"] is False and result["reason"] == "no change", result
    convo = Path(result["conversation"]["path"]).read_text()
    assert "write not allowed" in convo and "denyWrite" in convo
    assert not editor.recorded.apply_edits and not (workspace / path).exists()


async def test_the_model_written_git_dir_runs_nothing_on_hover(workspace, editors, fake_model, tmp_path) -> None:
    """The finding's attack in one reply: a fake git dir whose config runs a program as textconv, `sub/.git` pointing
    at it and `sub/.gitattributes` choosing the driver. The two git files are refused; what was written is inert."""
    target = make_repo(workspace)
    marker = tmp_path / "ran"
    textconv = f"sh -c 'touch {marker}; cat \"$1\"' -"
    evil = f'[core]\n\trepositoryformatversion = 0\n[diff "evil"]\n\ttextconv = {textconv}\n'
    reply = (
        write("fakegit/config", evil)
        + write("fakegit/HEAD", "ref: refs/heads/main\n")
        + write("sub/.git", "gitdir: ../fakegit\n")
        + write("sub/.gitattributes", "*.py diff=evil\n")
        + write("sub/a.py", "x = 1\n")
    )
    fake_model.script(text(reply), DONE)
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "preview": False})
        assert result["applied"] is True, result
        assert (workspace / "sub" / "a.py").exists() and not (workspace / "sub" / ".git").exists()
        assert not (workspace / "sub" / ".gitattributes").exists()
        await editor.hover(workspace / "sub" / "a.py", 0)
        history = await editor.command("nagent.history", {"uri": editor.uri(workspace / "sub" / "a.py")})
    assert history["file"].endswith("a.py")
    assert not marker.exists()


@pytest.mark.parametrize(
    "path, why",
    [
        (".husky/pre-commit", "reviewAlways pattern '.husky/**'"),
        (".vscode/tasks.json", "reviewAlways pattern '.vscode/tasks.json'"),
        (".envrc", "reviewAlways pattern '.envrc'"),
        ("tools/.githooks/post-checkout", "reviewAlways pattern '.githooks/**'"),
        (".github/workflows/ci.yml", "reviewAlways pattern '.github/workflows/**'"),
        ("scripts/run.sh", "is executable"),
    ],
)
@pytest.mark.parametrize("profile", ["vscode", "neovim"])
async def test_writes_that_run_later_are_always_proposed(profile, path, why, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file() and ".git" not in p.parts}
    fake_model.script(text(write(target.name, APP + "# touched\n") + write(path, "echo owned\n")), DONE)
    async with editors.open(profile, workspace, model=True, init_options={"confirmEdits": False}) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "preview": False})
        assert result["applied"] is False and result["reason"] == "awaiting review", result
        assert any(why in reason for reason in result["reviewRequired"]), result["reviewRequired"]
        assert not editor.recorded.apply_edits
        after = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file() and ".git" not in p.parts}
        assert {p: b for p, b in after.items() if ".nagent" not in p.parts} == before
        # The proposal is an ordinary one: the user can look and accept.
        listed = await editor.command("nagent.review.list", {})
        assert [p["id"] for p in listed["proposals"]] == [result["proposal"]["id"]]
        applied = await editor.command("nagent.review.apply", {"id": result["proposal"]["id"]})
        assert applied["applied"] is True
    assert (workspace / path).read_text() == "echo owned\n" or editor.text(workspace / path) == "echo owned\n"


async def test_review_always_is_user_extensible(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("deploy/prod.yml", "replicas: 9\n")), DONE)
    options = {"confirmEdits": False, "reviewAlways": ["deploy/**"]}
    async with editors.open("eglot", workspace, model=True, init_options=options) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
    assert result["reason"] == "awaiting review" and result["reviewRequired"] == [
        "deploy/prod.yml matches the reviewAlways pattern 'deploy/**'"
    ]
    assert not (workspace / "deploy").exists() and os.listdir(workspace) != []


async def test_the_per_user_secret_is_never_read_even_with_home_as_the_workspace(
    isolated_home, fake_model, model_env
) -> None:
    """The secret that proves proposals are the user's must not reach the model, whatever denyRead says."""
    target = isolated_home / "notes.py"
    target.write_text(APP, encoding="utf-8")
    fake_model.script(text(write("notes.py", APP + "# more\n")), DONE)
    options = {"denyRead": []}
    async with open_editor("eglot", isolated_home, isolated_home, env=model_env, init_options=options) as editor:
        editor.open(target)
        made = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "preview": True})
        assert made["reason"] == "awaiting review"  # a proposal: the secret exists now
        secret = (isolated_home / ".nagent" / "secret").read_text().strip()
        fake_model.script(text('<nagent-read path=".nagent/secret"/>'), DONE)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "read it"})
    sent = json.dumps([r.messages for r in fake_model.chat_requests])
    assert secret and secret not in sent
    assert "per-user secret, never read" in Path(result["conversation"]["path"]).read_text()
