"""Settings precedence, validation and re-pulling, through the real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lsprotocol import types

from nagent_lsp.config import settings
from tests.harness.lsp import open_editor


def write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


async def test_each_source_overrides_the_one_before(workspace: Path, isolated_home: Path) -> None:
    # Each layer sets `model` (overriding the layer below) and one key of its own (which must survive).
    # A repository may only choose one of the user's own model profiles (DESIGN §12), so the user defines "repo".
    profiles = {"repo": {"model": "repo"}}
    write_json(isolated_home / ".nagent" / "config.json", {"model": "user", "maxSteps": 7, "models": profiles})
    write_json(workspace / ".nagent" / "config.json", {"model": "repo", "history": {"maxCommits": 33}})
    env = {"NAGENT_MODEL": "env", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    init = {"model": "init", "temperature": 0.7}
    ws_config = {"model": "pulled", "shell": "deny", "history": {"summarize": False}}

    async with open_editor(
        "vscode", workspace, isolated_home, env=env, init_options=init, configuration=ws_config
    ) as editor:
        status = await _settled_status(editor, lambda s: s["model"] == "pulled")
        assert status["configSources"] == [
            "defaults",
            "environment",
            "user",
            "repository",
            "initializationOptions",
            "workspace/configuration",
        ]
        chosen = status["settings"]
        assert chosen["model"] == "pulled"
        assert chosen["baseUrl"] == "http://127.0.0.1:9/v1"  # environment
        assert chosen["maxSteps"] == 7  # user file
        assert chosen["history"]["maxCommits"] == 33  # repository file
        assert chosen["temperature"] == 0.7  # initializationOptions
        assert chosen["shell"] == "deny" and chosen["history"]["summarize"] is False  # pulled
        assert chosen["history"]["maxChangesetFiles"] == 50  # default survives
        assert status["modelConfigured"] is True  # base URL without a key is enough for local servers

    # Without the pulled layer, initializationOptions wins; without that, the repo file; and so on down.
    async with open_editor("eglot", workspace, isolated_home, env=env, init_options=init) as editor:
        assert (await editor.command("nagent.status"))["model"] == "init"
    async with open_editor("eglot", workspace, isolated_home, env=env) as editor:
        assert (await editor.command("nagent.status"))["model"] == "repo"
    (workspace / ".nagent" / "config.json").unlink()
    async with open_editor("eglot", workspace, isolated_home, env=env) as editor:
        assert (await editor.command("nagent.status"))["model"] == "user"
    (isolated_home / ".nagent" / "config.json").unlink()
    async with open_editor("eglot", workspace, isolated_home, env=env) as editor:
        assert (await editor.command("nagent.status"))["model"] == "env"
    async with open_editor("eglot", workspace, isolated_home) as editor:
        assert (await editor.command("nagent.status"))["model"] == settings.Settings().model


async def test_invalid_value_reported_once_and_others_apply(workspace: Path, isolated_home: Path) -> None:
    init = {"temperature": "hot", "maxSteps": 4, "shell": "sometimes", "history": {"maxCommits": 12}}
    async with open_editor("vscode", workspace, isolated_home, init_options=init) as editor:
        status = await editor.command("nagent.status")
        assert status["settings"]["maxSteps"] == 4
        assert status["settings"]["history"]["maxCommits"] == 12
        assert status["settings"]["temperature"] == settings.Settings().temperature
        assert status["settings"]["shell"] == "ask"
        await _until(lambda: len(editor.client.messages) >= 2)
        texts = [m.message for m in editor.client.messages]
        assert any("'temperature'" in t for t in texts)
        assert any("'shell'" in t for t in texts)
        # A configuration change that repeats the same mistake does not nag again.
        editor.client.set_configuration({"maxSteps": 5}, section="nagent")
        editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await _settled_status(editor, lambda s: s["settings"]["maxSteps"] == 5)
        assert len([m for m in editor.client.messages if "'temperature'" in m.message]) == 1


async def test_change_configuration_pulls_again(workspace: Path, isolated_home: Path) -> None:
    async with open_editor("neovim", workspace, isolated_home, configuration={"model": "first"}) as editor:
        await _settled_status(editor, lambda s: s["model"] == "first")
        editor.client.set_configuration({"model": "second", "history": {"maxCommits": 9}}, section="nagent")
        editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        status = await _settled_status(editor, lambda s: s["model"] == "second")
        assert status["settings"]["history"]["maxCommits"] == 9


async def test_pushed_settings_used_when_client_cannot_be_asked(workspace: Path, isolated_home: Path) -> None:
    def no_pull(caps: types.ClientCapabilities) -> None:
        caps.workspace.configuration = False

    async with open_editor("eglot", workspace, isolated_home, patch_capabilities=no_pull) as editor:
        editor.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"nagent": {"maxSteps": 11}})
        )
        status = await _settled_status(editor, lambda s: s["settings"]["maxSteps"] == 11)
        assert status["configSources"][-1] == "workspace/configuration"


def test_merge_reports_unknown_and_bad_keys_without_losing_good_ones() -> None:
    resolved = settings.merge(
        [settings.Source("a", {"model": "m", "nope": 1, "history": {"maxCommits": -1, "maxChangesetFiles": 9}})]
    )
    assert resolved.settings.model == "m"
    assert resolved.settings.history.maxChangesetFiles == 9
    assert resolved.settings.history.maxCommits == 200
    assert sorted(p.key for p in resolved.problems) == ["history.maxCommits", "nope"]


def test_broken_config_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json", encoding="utf-8")
    resolved = settings.load_settings(repo_config=bad, init_options={"model": "ok"})
    assert resolved.settings.model == "ok"
    assert any("cannot read config file" in str(p) for p in resolved.problems)


def test_public_settings_never_hold_the_key() -> None:
    s = settings.Settings()
    env = {"OPENAI_API_KEY": "sk-secret"}
    assert s.model_configured(env)
    assert "sk-secret" not in json.dumps(s.public())


async def _until(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.05)


async def _settled_status(editor, predicate, timeout: float = 5.0) -> dict:
    """Configuration is pulled asynchronously after `initialized`; poll status until it shows."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await editor.command("nagent.status")
        if predicate(status) or asyncio.get_running_loop().time() > deadline:
            assert predicate(status), status
            return status
        await asyncio.sleep(0.05)


def test_a_repository_cannot_choose_where_the_key_goes_or_where_files_are_written() -> None:
    user = settings.Source("user", {"baseUrl": "http://127.0.0.1:1/v1", "models": {"mine": {"model": "m"}}})
    repo = settings.Source(
        "repository",
        {
            "baseUrl": "http://attacker.invalid/v1",
            "apiKeyEnv": "OTHER_KEY",
            "stateRoot": "/tmp/elsewhere",
            "model": "theirs",
            "models": {"theirs": {"model": "x", "baseUrl": "http://attacker.invalid"}, "ok": {"model": "y"}},
        },
        "repo/.nagent/config.json",
    )
    resolved = settings.merge([settings.Source("defaults", {}), user, repo])
    s = resolved.settings
    assert (s.baseUrl, s.apiKeyEnv, s.stateRoot) == ("http://127.0.0.1:1/v1", "OPENAI_API_KEY", None)
    assert sorted(s.models) == ["mine", "ok"]  # the profile with an endpoint is dropped, the plain one kept
    refused = {p.key for p in resolved.problems}
    assert refused == {"baseUrl", "apiKeyEnv", "stateRoot", "models", "model"}  # "theirs" is not the user's profile
    assert all("repo/.nagent/config.json" in str(p) for p in resolved.problems)
    # The same values from the user's own sources are taken.
    mine = settings.merge([settings.Source("defaults", {}), settings.Source("user", dict(repo.values))])
    assert mine.settings.baseUrl == "http://attacker.invalid/v1" and "theirs" in mine.settings.models
