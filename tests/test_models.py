"""Model profiles (DESIGN §10): `model`/`summaryModel` name a profile or a raw id; summaries go to summaryModel."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagent_lsp.config.settings import ModelProfile, Settings, Source, merge
from nagent_lsp.core.errors import UserError
from nagent_lsp.llm.models import model_settings, summary_settings
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import repository_settings

PROFILES = {
    "strong": {"model": "strong-model", "temperature": 0.7},
    "cheap": {"model": "cheap-model", "maxOutputTokens": 300},
}


def test_profile_fields_fall_back_to_the_top_level_settings() -> None:
    settings = Settings(
        model="strong",
        baseUrl="http://top/v1",
        temperature=0.1,
        models={"strong": ModelProfile(model="s-1", temperature=0.9), "cheap": ModelProfile(model="c-1")},
        summaryModel="cheap",
    )
    edit = model_settings(settings)
    assert (edit.model, edit.temperature, edit.baseUrl, edit.maxOutputTokens) == ("s-1", 0.9, "http://top/v1", 8192)
    summary = summary_settings(settings)
    assert (summary.model, summary.temperature) == ("c-1", 0.1)
    assert model_settings(settings, "gpt-raw").model == "gpt-raw"  # not a profile: a raw model id
    assert summary_settings(Settings(model="only")).model == "only"  # no summaryModel: the model
    with pytest.raises(UserError, match="unknown model profile 'ghost'.*known profiles: cheap, strong"):
        model_settings(settings, "ghost", strict=True)


def test_a_repository_config_only_narrows_what_the_user_allows() -> None:
    user = Source("user", {"shell": "ask", "writeScope": "target", "denyRead": [".env"]})
    repo = Source("repository", {"shell": "allow", "writeScope": "workspace", "denyRead": ["*.secret"]}, "repo.json")
    resolved = merge([Source("defaults", {}), user, repo])
    assert resolved.settings.shell == "ask" and resolved.settings.writeScope == "target"
    assert resolved.settings.denyRead == (".env", "*.secret")  # added to, never replaced
    assert {p.key for p in resolved.problems} == {"shell", "writeScope"}
    narrowed = merge([Source("defaults", {}), Source("repository", {"shell": "deny"}, "repo.json")])
    assert narrowed.settings.shell == "deny" and not narrowed.problems
    widened = merge([Source("defaults", {}), Source("initializationOptions", {"shell": "allow"})])
    assert widened.settings.shell == "allow"  # the editor's own settings are the user's


async def test_summaries_go_to_summary_model_and_edits_to_model(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"app.py": "x = 1\n"})])
    target = workspace / "app.py"
    # The user's own profiles and choice (editor settings): a repository may only pick among the user's profiles.
    chosen = {"models": PROFILES, "model": "strong", "summaryModel": "cheap"}
    fake_model.script(
        text("Sets x."),
        text(f'<nagent-write path="{target}">\nx = 2\n</nagent-write>'),
        text("<nagent-response>done</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True, init_options=chosen) as editor:
        uri = editor.open(target)
        status = await editor.command("nagent.status")
        summary = await editor.command("nagent.summarize", {"uri": uri})
        edited = await editor.command("nagent.edit", {"uri": uri, "request": "bump"})
    # The status names what requests really use: the profile's model id, and the profile it came from.
    assert (status["model"], status["modelProfile"], status["summaryModel"]) == (
        "strong-model",
        "strong",
        "cheap-model",
    )
    assert summary["summary"] == "Sets x." and edited["applied"] is True
    summarised, *edits = fake_model.chat_requests
    assert summarised.body["model"] == "cheap-model" and summarised.body["max_tokens"] == 300
    assert [r.body["model"] for r in edits] == ["strong-model", "strong-model"]
    assert all(r.body["temperature"] == 0.7 for r in edits)


async def test_an_agent_model_names_a_profile(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"app.py": "x = 1\n"})])
    target = workspace / "app.py"
    repository_settings(workspace, {"models": PROFILES})
    agent = workspace / ".nagent" / "agents" / "thrifty.md"
    agent.parent.mkdir(parents=True)
    agent.write_text("---\ndescription: cheap answers\nmodel: cheap\ntemperature: 0.05\nmaxSteps: 1\n---\n")
    fake_model.script(text("<nagent-response>ok</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "q", "agent": "thrifty"})
    assert result["response"] == "ok"
    (request,) = fake_model.chat_requests
    assert request.body["model"] == "cheap-model" and request.body["temperature"] == 0.05
    assert Path(result["conversation"]["path"]).is_file()
