"""Issue 25, "model per request": `profile` on `nagent.edit`, `nagent.instruction.apply` and `nagent.recipe.run`
picks one of the user's model profiles for that request only; `nagent.status` lists them (`profiles`); results
carry one server-formatted `message` line whose cost is in US dollars."""

from __future__ import annotations

import re
from pathlib import Path

from pygls.exceptions import JsonRpcInvalidParams

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

ORIGINAL = "def add(a, b):\n    return a + b\n"
CHANGED = "def add(a, b):\n    return b + a\n"
PROFILES = {
    "models": {
        "fast": {"model": "fast-model"},
        "strong": {"model": "strong-model", "price": {"input": 2, "output": 8}},
    },
    "model": "fast",
}
REWRITE = """description: Rewrite the file
steps:
  - step: rewrite
    inputs: [fileText]
    outputs: {fileText: string}
    systemPrompt: |
      Rewrite this file:
      {{fileText}}
"""


def repo(workspace: Path, content: str = ORIGINAL) -> Path:
    build_repo(workspace, [Commit("init", {"calc.py": content})])
    return workspace / "calc.py"


def write(path: Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


async def test_a_profile_for_one_request(profile, workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text(write(target, CHANGED)), text("<nagent-response>swapped</nagent-response>"))
    fake_model.script(text("<nagent-response>plain</nagent-response>"))
    async with editors.open(profile, workspace, model=True, init_options=PROFILES) as editor:
        status = await editor.command("nagent.status")
        assert status["profiles"] == ["fast", "strong"]
        uri = editor.open(target)
        strong = await editor.command("nagent.edit", {"uri": uri, "request": "swap", "profile": "strong"})
        assert strong["applied"] is True and editor.text(target) == CHANGED, strong
        plain = await editor.command("nagent.edit", {"uri": uri, "request": "explain"})
        error = await editor.command_error("nagent.edit", {"uri": uri, "request": "x", "profile": "nope"})
    models = [request.body["model"] for request in fake_model.chat_requests]
    assert models == ["strong-model", "strong-model", "fast-model"]  # the request only; the next uses `model`
    assert isinstance(error, JsonRpcInvalidParams)
    assert "profile" in error.message and "unknown model profile 'nope'" in error.message
    assert "fast, strong" in error.message
    # One line, formatted by the server: the outcome, the tokens, the cost in USD (the strong profile has a price).
    tokens = strong["tokens"]
    assert strong["message"] == (
        f"calc.py: applied {strong['edits']} edit · {tokens['input']:,} in / {tokens['output']:,} out tokens"
        f" · ${tokens['cost']:.4f}"
    )
    assert "$" not in plain["message"] and plain["message"].startswith("calc.py: nothing applied (no change)")


async def test_profile_on_instruction_and_recipe(workspace, editors, fake_model) -> None:
    target = repo(workspace, ORIGINAL + "# nagent: swap the operands\n")
    recipe = workspace / ".nagent" / "recipes" / "rewrite.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(REWRITE, encoding="utf-8")
    fake_model.script(text(write(target, CHANGED + "# nagent: swap the operands\n")), text("<nagent-response>ok"))
    fake_model.script(text(ORIGINAL))
    async with editors.open("eglot", workspace, model=True, init_options=PROFILES) as editor:
        uri = editor.open(target)
        applied = await editor.command("nagent.instruction.apply", {"uri": uri, "line": 2, "profile": "strong"})
        assert applied["applied"] is True and editor.text(target) == CHANGED, applied
        ran = await editor.command("nagent.recipe.run", {"uri": uri, "recipe": "rewrite", "profile": "strong"})
        error = await editor.command_error("nagent.recipe.run", {"uri": uri, "recipe": "rewrite", "profile": "x"})
    assert [request.body["model"] for request in fake_model.chat_requests] == ["strong-model"] * 3
    assert ran["applied"] is True and re.search(r"· \$\d+\.\d{4}$", ran["message"]), ran["message"]
    assert "$" in applied["message"]
    assert isinstance(error, JsonRpcInvalidParams) and "unknown model profile 'x'" in error.message


def test_profile_from_the_cli(workspace, isolated_home, fake_model, model_env) -> None:
    """`nagent-lsp edit FILE "request" --profile NAME`: the same per-request profile, and the same refusal."""
    import json
    import os
    import subprocess
    import sys

    target = repo(workspace)
    config = isolated_home / ".nagent" / "config.json"
    config.write_text(json.dumps({**PROFILES, "history": {"summarize": False}}), encoding="utf-8")
    fake_model.script(text(write(target, CHANGED)), text("<nagent-response>swapped</nagent-response>"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}, **model_env}
    env["HOME"] = str(isolated_home)

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "nagent_lsp", "edit", "calc.py", *argv]
        return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=300)

    ran = cli("swap", "--profile", "strong")
    assert ran.returncode == 0, ran.stderr
    assert target.read_text() == CHANGED
    assert [request.body["model"] for request in fake_model.chat_requests] == ["strong-model"] * 2
    refused = cli("swap", "--profile", "nope")
    assert refused.returncode != 0 and "unknown model profile 'nope'" in refused.stderr, refused.stderr
