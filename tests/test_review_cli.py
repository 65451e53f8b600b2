"""`nagent-lsp edit FILE "request" --review` (asked per hunk on a terminal; without one the proposal stays pending)
and `nagent-lsp review list|show|apply|discard`."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.test_cli import cli

BASE = "".join(f"v{i} = {i}\n" for i in range(12))
CHANGED = BASE.replace("v1 = 1", "v1 = 'one'").replace("v10 = 10", "v10 = 'ten'")
GUARD = 120.0  # seconds: only keeps a failing test from hanging, never asserted


def script_two_hunks_and_a_new_file(fake_model) -> None:
    fake_model.script(
        text(
            f'<nagent-write path="a.py">\n{CHANGED}</nagent-write><nagent-write path="b.py">\nnew = 1\n</nagent-write>'
        ),
        text("<nagent-response>done</nagent-response>"),
    )


def no_terminal(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The CLI with stdin not a terminal (whatever the test runner's is)."""
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


def test_review_without_a_terminal_keeps_the_proposal_then_applies_a_subset(workspace: Path, fake_model, model_env):
    build_repo(workspace, [Commit("init", {"a.py": BASE})])
    target = workspace / "a.py"
    script_two_hunks_and_a_new_file(fake_model)
    out = no_terminal("edit", "a.py", "name them", "--review", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    assert "[h1]" in out.stdout and "+v1 = 'one'" in out.stdout and "[h3]" in out.stdout and "+new = 1" in out.stdout
    assert "--- /dev/null" in out.stdout  # b.py is a new file
    # Each hunk reads as `git diff` shows it: paths relative to the folder, where it sits now, lines around it.
    assert "[h1] a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,5 +1,5 @@\n v0 = 0\n-v1 = 1\n+v1 = 'one'\n v2 = 2\n" in out.stdout
    assert "@@ -8,5 +8,5 @@\n v7 = 7\n v8 = 8\n v9 = 9\n-v10 = 10\n+v10 = 'ten'\n v11 = 11\n" in out.stdout
    assert "[h3] b.py (new file)\n--- /dev/null\n+++ b/b.py\n@@ -0,0 +1 @@\n+new = 1\n" in out.stdout
    assert target.read_text() == BASE and not (workspace / "b.py").exists()
    listed = json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)
    (proposal,) = listed["proposals"]
    # It says how to resolve the proposal it left pending.
    assert f"awaits review: nagent-lsp review apply {proposal['id']}" in out.stderr
    assert f"nagent-lsp review discard {proposal['id']}" in out.stderr
    assert "apply h1?" not in out.stdout + out.stderr  # nothing was asked
    applied = cli("review", "apply", proposal["id"], "--accept", "h2", cwd=workspace, env=model_env)
    assert applied.returncode == 0, applied.stderr
    result = json.loads(applied.stdout)
    assert result["applied"] is True and sorted(result["rejected"]) == ["h1", "h3"]
    assert target.read_text() == BASE.replace("v10 = 10", "v10 = 'ten'") and not (workspace / "b.py").exists()
    assert json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)["proposals"] == []
    missing = cli("review", "discard", proposal["id"], cwd=workspace, env=model_env)
    assert missing.returncode == 2 and "already resolved" in missing.stderr


class Terminal:
    """The CLI on a pseudo-terminal: what it writes is read as it comes, answers are typed when it asks."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nagent_lsp", *args],
            cwd=cwd,
            env={**os.environ, **env, "TERM": "dumb"},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        self.output = ""

    def read_until(self, pattern: str) -> str:
        """Everything written up to and including `pattern` (a regex); raises when the CLI ends first."""
        wanted = re.compile(pattern)
        while not (found := wanted.search(self.output)):
            if not self._read():
                raise AssertionError(f"the CLI ended without writing {pattern!r}:\n{self.output}")
        return self.output[: found.end()]

    def type(self, line: str) -> None:
        os.write(self.master, f"{line}\n".encode())

    def finish(self) -> tuple[int, str]:
        while self._read():
            pass
        os.close(self.master)
        return self.process.wait(GUARD), self.output

    def _read(self) -> bool:
        ready, _, _ = select.select([self.master], [], [], GUARD)
        if not ready:
            raise AssertionError(f"the CLI wrote nothing for {GUARD}s:\n{self.output}")
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the CLI closed the terminal (it ended)
            return False
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return bool(data)


def test_review_on_a_terminal_asks_per_hunk(workspace: Path, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("init", {"a.py": BASE})])
    target = workspace / "a.py"
    script_two_hunks_and_a_new_file(fake_model)
    terminal = Terminal(["edit", "a.py", "name them", "--review"], workspace, model_env)
    try:
        shown = terminal.read_until(r"apply h1\? \[y,n,a,q\] ")
        assert "[h1]" in shown and "+v1 = 'one'" in shown and "[h2]" in shown and "+v10 = 'ten'" in shown
        assert "[h3]" in shown and "--- /dev/null" in shown and "+new = 1" in shown
        terminal.type("y")
        terminal.read_until(r"apply h2\? \[y,n,a,q\] ")
        terminal.type("n")
        terminal.read_until(r"apply h3\? \[y,n,a,q\] ")
        terminal.type("n")
        code, output = terminal.finish()
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    assert code == 0, output
    assert "applied: True, rejected: h2, h3" in output
    assert target.read_text() == BASE.replace("v1 = 1", "v1 = 'one'") and not (workspace / "b.py").exists()
    assert json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)["proposals"] == []
    conversation = Path(re.search(r"conversation: (\S+)", output).group(1)).read_text(encoding="utf-8")
    review = conversation[conversation.index("<nagent-review-result") :]
    assert 'accepted="h1"' in review and 'rejected="h2 h3"' in review
    assert "Rejected by the user: h2" in review and "v10 = 'ten'" in review and "new = 1" in review
    assert "v1 = 'one'" not in review.split("Rejected by the user", 1)[1]  # the accepted text is not a refusal
