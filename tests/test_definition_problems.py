"""Issue 25: broken agent and recipe files never vanish silently from the pickers: every file of an agents/ or
recipes/ folder that is not loaded is in `problems` of `nagent.agents.list` / `nagent.recipes.list`, with why."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.gitrepo import Commit, build_repo

AGENT = "---\ndescription: Reviews\n---\nReview it.\n"
RECIPE = "description: Runs\nsteps:\n  - step: s\n    outputs: {out: string}\n    systemPrompt: go\n"


def cloned(tmp_path: Path, workspace: Path) -> None:
    """A repository whose `.nagent/` brings misnamed, duplicate and linked definitions, cloned as a stranger's."""
    origin = tmp_path / "origin"
    build_repo(
        origin,
        [
            Commit(
                "init",
                {
                    "app.py": "x = 1\n",
                    ".nagent/agents/reviewer.md": AGENT,
                    ".nagent/agents/helper.txt": AGENT,
                    ".nagent/recipes/tests.yaml": RECIPE,
                    ".nagent/recipes/tests.json": '{"description": "first", "steps": [{"step": "s", '
                    '"outputs": {"out": "string"}, "systemPrompt": "go"}]}',
                    ".nagent/recipes/notes.md": "# not a recipe\n",
                    ".nagent/recipes/.gitkeep": "",
                },
            )
        ],
    )
    (origin / ".nagent" / "agents" / "linked.md").symlink_to("/etc/passwd")
    subprocess.run(["git", "-C", str(origin), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(origin), "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-qm", "link"],
        check=True,
    )
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
    workspace.rmdir()
    subprocess.run(["git", "clone", "-q", str(bare), str(workspace)], check=True)


async def test_every_file_not_loaded_is_a_problem(profile, workspace, editors, tmp_path) -> None:
    cloned(tmp_path, workspace)
    state = workspace / ".nagent"
    async with editors.open(profile, workspace) as editor:
        agents = await editor.command("nagent.agents.list", {})
        recipes = await editor.command("nagent.recipes.list", {})

    def problem(problems: list[str], path: Path) -> str:
        found = [p for p in problems if p.startswith(f"{path}: ")]
        assert len(found) == 1, (path, problems)
        return found[0]

    assert "reviewer" in {a["name"] for a in agents["agents"]}
    assert "agent files end in .md" in problem(agents["problems"], state / "agents" / "helper.txt")
    assert "symbolic link" in problem(agents["problems"], state / "agents" / "linked.md")
    assert "linked" not in {a["name"] for a in agents["agents"]}
    assert [r["name"] for r in recipes["recipes"]] == ["tests"]
    assert "tests.json defines recipe 'tests' too" in problem(recipes["problems"], state / "recipes" / "tests.yaml")
    assert ".yaml or .yml or .json" in problem(recipes["problems"], state / "recipes" / "notes.md")
    assert not [p for p in recipes["problems"] if ".gitkeep" in p]
