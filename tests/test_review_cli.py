"""`nagent-lsp edit FILE "request" --review` and `nagent-lsp review list|show|apply|discard`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.test_cli import cli

BASE = "".join(f"v{i} = {i}\n" for i in range(12))


def test_review_without_a_terminal_keeps_the_proposal_then_applies_a_subset(workspace: Path, fake_model, model_env):
    build_repo(workspace, [Commit("init", {"a.py": BASE})])
    target = workspace / "a.py"
    changed = BASE.replace("v1 = 1", "v1 = 'one'").replace("v10 = 10", "v10 = 'ten'")
    fake_model.script(
        text(
            f'<nagent-write path="a.py">\n{changed}</nagent-write><nagent-write path="b.py">\nnew = 1\n</nagent-write>'
        ),
        text("<nagent-response>done</nagent-response>"),
    )
    out = cli("edit", "a.py", "name them", "--review", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    assert "[h1]" in out.stdout and "+v1 = 'one'" in out.stdout and "[h3]" in out.stdout and "+new = 1" in out.stdout
    assert "awaits review" in out.stderr
    assert target.read_text() == BASE and not (workspace / "b.py").exists()
    listed = json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)
    (proposal,) = listed["proposals"]
    applied = cli("review", "apply", proposal["id"], "--accept", "h2", cwd=workspace, env=model_env)
    assert applied.returncode == 0, applied.stderr
    result = json.loads(applied.stdout)
    assert result["applied"] is True and sorted(result["rejected"]) == ["h1", "h3"]
    assert target.read_text() == BASE.replace("v10 = 10", "v10 = 'ten'") and not (workspace / "b.py").exists()
    assert json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)["proposals"] == []
    missing = cli("review", "discard", proposal["id"], cwd=workspace, env=model_env)
    assert missing.returncode == 2 and "already resolved" in missing.stderr
