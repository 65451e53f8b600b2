"""Recipes (DESIGN §10, AGENTS.md step chains) through the protocol: list, run, delivery, bad files, comments."""

from __future__ import annotations

import json
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import repository_settings

ORIGINAL = "def greet(name):\n    return 'hi ' + name\n"
CHANGED = "def greet(name):\n    return f'hello {name}'\n"

TWO_STEPS = {
    "description": "Draft a line, then shout it",
    "models": [{"name": "drafter", "model": "draft-model", "params": {"temperature": 0.3}}],
    "steps": [
        {
            "step": "draft",
            "inputs": ["userRequest", "file"],
            "outputs": {"draft": "string"},
            "modelRef": "drafter",
            "systemPrompt": "Write one line about {{file}} for: {{userRequest}}",
        },
        {
            "step": "shout",
            "inputs": ["draft"],
            "outputs": {"loud": "string"},
            "command": ["python3", "-c", "import sys; print(sys.argv[1].strip().upper())", "{{draft}}"],
        },
    ],
}

REWRITE = """
description: Rewrite the file in one go
steps:
  - step: rewrite
    inputs: [fileText, selection]
    outputs: {fileText: string}
    systemPrompt: |
      Rewrite this file:
      {{fileText}}
"""


def repo(workspace: Path, content: str = ORIGINAL) -> Path:
    build_repo(workspace, [Commit("init", {"app.py": content})])
    return workspace / "app.py"


def recipe(workspace: Path, name: str, body: dict | str, suffix: str = ".json") -> Path:
    path = workspace / ".nagent" / "recipes" / f"{name}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body) if isinstance(body, dict) else body, encoding="utf-8")
    return path


def convo_of(result: dict) -> str:
    return Path(result["conversation"]["path"]).read_text(encoding="utf-8")


async def test_two_step_recipe_returns_both_outputs_and_records_each_step(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    recipe(workspace, "shout", TWO_STEPS)
    fake_model.script(text("```\nquiet words\n```"))
    async with editors.open("vscode", workspace, model=True, init_options={"shell": "allow"}) as editor:
        editor.open(target)
        listed = await editor.command("nagent.recipes.list", {"uri": editor.uri(target)})
        trusted = await editor.command("nagent.trust", {"uri": editor.uri(target)})  # it has a command step
        relisted = await editor.command("nagent.recipes.list", {"uri": editor.uri(target)})
        result = await editor.command(
            "nagent.recipe.run", {"uri": editor.uri(target), "recipe": "shout", "request": "a greeting"}
        )
        assert not editor.recorded.apply_edits
    (entry,) = [r for r in listed["recipes"] if r["name"] == "shout"]
    assert entry["source"] == "workspace" and entry["needsRequest"] is True
    assert entry["trusted"] is False and entry["shadowed"] is False
    assert trusted["trusted"] is True and trusted["files"] == ["recipes/shout.json"]
    assert [r["trusted"] for r in relisted["recipes"] if r["name"] == "shout"] == [True]
    assert [s["kind"] for s in entry["steps"]] == ["llm", "command"]
    assert result["outputs"] == {"draft": "quiet words\n", "loud": "QUIET WORDS\n"}
    assert result["response"] == "QUIET WORDS\n" and result["applied"] is False and result["reason"] == "no change"
    (request,) = fake_model.chat_requests
    assert request.body["model"] == "draft-model" and request.body["temperature"] == 0.3
    assert "for: a greeting" in request.messages[0]["content"] and str(target) in request.messages[0]["content"]
    convo = convo_of(result)
    assert '<nagent-recipe-result recipe="shout"' in convo and 'status="ok"' in convo
    assert 'step 1 "draft" (model: draft-model) -> draft (string):\nquiet words' in convo
    assert 'step 2 "shout" (command: python3 -c' in convo and "exit code 0) -> loud (string):\nQUIET WORDS" in convo


async def test_recipe_that_outputs_file_text_produces_an_edit(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    recipe(workspace, "rewrite", REWRITE, ".yaml")
    fake_model.script(text(CHANGED), text(CHANGED))
    async with editors.open("eglot", workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "rewrite"})
        assert editor.text(target) == CHANGED and target.read_text() == ORIGINAL
        proposed = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "rewrite", "preview": True})
    assert result["applied"] is True and result["edits"] == 1 and result["response"] == ""
    assert Path(result["patchPath"]).is_file()
    assert "<nagent-edit-result" in convo_of(result)
    assert proposed["reason"] == "no change"  # the buffer already holds that text


async def test_a_recipe_run_is_priced_by_its_steps_profiles(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    recipe(workspace, "rewrite", REWRITE, ".yaml")
    recipe(workspace, "shout", TWO_STEPS)  # its own profile "drafter" has no price
    fake_model.script(text(CHANGED), text("quiet"))
    priced = {"models": {"paid": {"model": "paid-model", "price": {"input": 2, "output": 10}}}, "model": "paid"}
    async with editors.open("vscode", workspace, model=True, init_options={**priced, "shell": "allow"}) as editor:
        uri = editor.open(target)
        assert (await editor.command("nagent.trust", {"uri": uri}))["trusted"] is True  # shout has a command step
        rewritten = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "rewrite"})
        shouted = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "shout", "request": "hi"})
    tokens = rewritten["tokens"]
    assert tokens["input"] > 0 and tokens["cost"] == round((tokens["input"] * 2 + tokens["output"] * 10) / 1e6, 6)
    assert "cost" not in shouted["tokens"]  # a step on an unpriced profile: the run's cost is unknown, not 0


async def test_recipe_proposal_under_review(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    recipe(workspace, "rewrite", REWRITE, ".yaml")
    fake_model.script(text(CHANGED))
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "rewrite", "preview": True})
        assert editor.text(target) == ORIGINAL
    assert result["applied"] is False and result["reason"] == "awaiting review" and result["proposal"]["id"]


async def test_denied_command_step_ends_the_run_with_its_reason(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    recipe(workspace, "shout", TWO_STEPS)
    repository_settings(workspace, {"shell": "deny"})
    fake_model.script(text("words"))
    async with editors.open("neovim", workspace, model=True) as editor:
        editor.open(target)
        assert (await editor.command("nagent.trust", {}))["trusted"] is True  # trust is not the shell permission
        result = await editor.command(
            "nagent.recipe.run", {"uri": editor.uri(target), "recipe": "shout", "request": "x"}
        )
    assert result["outputs"] == {"draft": "words"}
    assert result["reason"].startswith("step 'shout': command not run:") and "'deny'" in result["reason"]
    convo = convo_of(result)
    assert 'status="error"' in convo and "step 'shout': command not run" in convo and 'steps="1/2"' in convo


BAD = {
    "unknown-var": (
        "description: d\nsteps:\n  - step: s\n    inputs: [nothing]\n    outputs: {x: string}\n    command: [echo]\n",
        ["step 's'", "field 'inputs'", "unknown variable 'nothing'"],
    ),
    "template-var": (
        "description: d\nsteps:\n  - step: s\n    inputs: []\n    outputs: {x: string}\n"
        "    systemPrompt: 'hi {{who}}'\n",
        ["step 's'", "field 'systemPrompt'", "unknown variable '{{who}}'"],
    ),
    "no-outputs": (
        "description: d\nsteps:\n  - step: s\n    command: [echo]\n",
        ["step 's'", "field 'outputs'", "exactly one output"],
    ),
    "two-outputs": (
        "description: d\nsteps:\n  - step: s\n    outputs: {a: string, b: string}\n    command: [echo]\n",
        ["step 's'", "field 'outputs'", "exactly one variable, this one declares 2"],
    ),
    "bad-profile": (
        "description: d\nsteps:\n  - step: s\n    outputs: {a: string}\n    model: ghost\n    systemPrompt: x\n",
        ["step 's'", "field 'model'", "unknown model profile 'ghost'"],
    ),
    "malformed": ("description: [d\n", ["malformed YAML"]),
}


async def test_bad_recipes_are_reported_naming_file_step_and_field(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    paths = {name: recipe(workspace, name, body, ".yaml") for name, (body, _) in BAD.items()}
    recipe(workspace, "count", {
        "description": "a number that is not one",
        "steps": [{"step": "n", "outputs": {"n": "number"}, "systemPrompt": "count"}],
    })  # fmt: skip
    fake_model.script(text("about seven"))
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        listed = await editor.command("nagent.recipes.list", {})
        refused = await editor.command_error("nagent.recipe.run", {"uri": uri, "recipe": "two-outputs"})
        counted = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "count"})
        missing = await editor.command_error("nagent.recipe.run", {"uri": uri, "recipe": "nope"})
    problems = listed["problems"]
    for name, (_, needles) in BAD.items():
        (problem,) = [p for p in problems if p.startswith(str(paths[name]))]
        assert all(n in problem for n in needles), problem
    assert [r["name"] for r in listed["recipes"]] == ["count"]
    assert (
        isinstance(refused, JsonRpcInvalidParams) and "two-outputs.yaml: step 's': field 'outputs'" in refused.message
    )
    assert "is declared number" in counted["reason"] and counted["outputs"] == {}
    assert "unknown recipe 'nope'" in missing.message


async def test_recipe_comment_and_run_recipe_code_action(workspace, editors, fake_model) -> None:
    source = "# nagent[rewrite]: make it friendlier\n" + ORIGINAL
    target = repo(workspace, source)
    recipe(workspace, "rewrite", REWRITE, ".yaml")
    recipe(workspace, "shout", TWO_STEPS)
    fake_model.script(text(CHANGED))
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[]),
        )
        untrusted = [a.title for a in await editor.client.text_document_code_action_async(params)]
        await editor.command("nagent.trust", {"uri": uri})
        actions = await editor.client.text_document_code_action_async(params)
        titles = [a.title for a in actions]
        result = await editor.command("nagent.instruction.apply", {"uri": uri, "line": 0})
        assert editor.text(target) == CHANGED  # the comment went with the delivered fileText
    # No repository recipe is a one-click action until the user trusts the repository's definitions.
    assert "nagent: run recipe rewrite" not in untrusted, untrusted
    # Not even through a comment in the file: a clone can plant `nagent[rewrite]:` comments as easily as recipes.
    assert not any(t.startswith("nagent: run recipe rewrite") for t in untrusted), untrusted
    assert "nagent: run recipe rewrite (make it friendlier)" in titles  # the comment's own action
    assert "nagent: run recipe rewrite" in titles and "nagent: run recipe shout" not in titles  # shout needs a request
    assert result["applied"] is True
    assert "request: make it friendlier" in convo_of(result)
