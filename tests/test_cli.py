"""The headless CLI runs the same workflows as the editor commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_history_and_coedits(workspace: Path) -> None:
    build_repo(
        workspace,
        [
            Commit("start", {"app.py": "1\n", "test_app.py": "t\n"}, author="Ann", email="ann@example.com"),
            Commit("fix app", {"app.py": "2\n", "test_app.py": "t2\n"}, author="Bob", email="bob@example.com"),
            Commit("doc", {"README.md": "r\n"}),
        ],
    )
    out = cli("history", "app.py", cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert "fix app" in out.stdout and "Ann" in out.stdout and "Bob" in out.stdout
    data = json.loads(cli("history", "app.py", "--json", cwd=workspace).stdout)
    assert [c["subject"] for c in data["commits"]] == ["fix app", "start"]
    rows = json.loads(cli("coedits", "app.py", "--json", cwd=workspace).stdout)["rows"]
    assert rows[0]["path"] == "test_app.py" and rows[0]["level"] == "high"
    outside = cli("history", str(workspace.parent / "nope.py"), cwd=workspace)
    assert outside.returncode != 0 and "nagent-lsp:" in outside.stderr


def test_split_then_patch_roundtrip(workspace: Path) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(4000))
    build_repo(workspace, [Commit("big", {"big.py": body})])
    split = json.loads(cli("split", "big.py", cwd=workspace).stdout)
    assert len(split["segments"]) > 1
    first = Path(split["segments"][0]["path"])
    first.write_text(first.read_text().replace("return 0", "return 'zero'"))
    result = cli("patch", split["indexPath"], cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["applied"] is True
    assert (workspace / "big.py").read_text() == body.replace("return 0", "return 'zero'", 1)


def test_edit_writes_atomically_and_prints_diff(workspace: Path, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("init", {"a.py": "x = 1\n"})])
    target = workspace / "a.py"
    fake_model.script(
        text(f'<nagent-write path="{target}">\nx = 2\n</nagent-write>'),
        text("<nagent-response>bumped</nagent-response>"),
    )
    env = {**model_env, "OPENAI_API_KEY": "sk-cli-marker"}
    out = cli("edit", "a.py", "bump x", cwd=workspace, env=env)
    assert out.returncode == 0, out.stderr
    assert target.read_text() == "x = 2\n"
    assert "bumped" in out.stdout and "+x = 2" in out.stdout
    assert "sk-cli-marker" not in out.stdout + out.stderr


def test_edit_without_model_names_the_setting(workspace: Path) -> None:
    build_repo(workspace, [Commit("init", {"a.py": "x = 1\n"})])
    out = cli("edit", "a.py", "anything", cwd=workspace)
    assert out.returncode == 1 and "OPENAI_API_KEY" in out.stderr
