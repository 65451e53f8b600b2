"""The CLI's `agents`, `recipes`, `recipe NAME FILE [request]` and `edit --agent` (DESIGN §10)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.test_cli import cli

RECIPE = """
description: Say what the file is for, then count its words
steps:
  - step: describe
    inputs: [fileText, userRequest]
    outputs: {about: string}
    systemPrompt: "{{userRequest}}: {{fileText}}"
  - step: count
    inputs: [about]
    outputs: {words: number}
    command: [python3, -c, "import sys; print(len(sys.argv[1].split()))", "{{about}}"]
"""


def setup(workspace: Path, home: Path) -> None:
    build_repo(workspace, [Commit("init", {"a.py": "x = 1\n"})])
    (workspace / ".nagent" / "recipes").mkdir(parents=True)
    (workspace / ".nagent" / "recipes" / "about.yaml").write_text(RECIPE)
    (home / ".nagent" / "agents").mkdir(parents=True, exist_ok=True)
    (home / ".nagent" / "agents" / "careful.md").write_text("---\ndescription: Careful edits\n---\nGo slowly.\n")


def test_agents_and_recipes_lists(workspace: Path, isolated_home: Path) -> None:
    setup(workspace, isolated_home)
    out = cli("agents", cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert "plan" in out.stdout and "builtin" in out.stdout and "careful" in out.stdout and "user" in out.stdout
    data = json.loads(cli("agents", "--json", cwd=workspace).stdout)
    assert {a["name"]: a["source"] for a in data["agents"]}["careful"] == "user"
    out = cli("recipes", cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert "about  workspace" in out.stdout and "describe (llm) → count (command)" in out.stdout
    assert "[needs a request]" in out.stdout
    assert "[untrusted: its commands run once you run `nagent-lsp trust`]" in out.stdout
    listed = json.loads(cli("recipes", "--json", "--folder", str(workspace), cwd=isolated_home).stdout)
    assert [r["name"] for r in listed["recipes"]] == ["about"]


def test_recipe_runs_both_steps(workspace: Path, isolated_home: Path, fake_model, model_env) -> None:
    setup(workspace, isolated_home)
    config = isolated_home / ".nagent" / "config.json"
    config.write_text(json.dumps({"shell": "allow", "history": {"summarize": False}}))
    fake_model.script(text("a tiny module"))
    refused = cli("recipe", "about", "a.py", "describe it", "--json", cwd=workspace, env=model_env)
    assert refused.returncode == 1 and "has command steps; they run only once you trust" in refused.stderr
    assert not fake_model.chat_requests  # refused before any step, the model's too
    trusted = cli("trust", "--yes", cwd=workspace)
    assert trusted.returncode == 0, trusted.stderr
    out = cli("recipe", "about", "a.py", "describe it", "--json", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outputs"] == {"about": "a tiny module", "words": 3}
    assert "describe it: x = 1" in fake_model.chat_requests[0].messages[0]["content"]
    plain = cli("recipe", "about", "a.py", cwd=workspace, env=model_env)
    assert plain.returncode == 2 and "uses userRequest" in plain.stderr
    unknown = cli("recipe", "nope", "a.py", cwd=workspace, env=model_env)
    assert unknown.returncode == 2 and "unknown recipe 'nope'" in unknown.stderr


def test_edit_with_an_agent(workspace: Path, isolated_home: Path, fake_model, model_env) -> None:
    setup(workspace, isolated_home)
    target = workspace / "a.py"
    fake_model.script(
        text(f'<nagent-write path="{target}">\nx = 2\n</nagent-write>'), text("<nagent-response>plan</nagent-response>")
    )
    out = cli("edit", "a.py", "bump", "--agent", "plan", "--json", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["applied"] is False and target.read_text() == "x = 1\n"
    careful = cli("edit", "a.py", "bump", "--agent", "nobody", cwd=workspace, env=model_env)
    assert careful.returncode == 2 and "unknown agent 'nobody'" in careful.stderr
