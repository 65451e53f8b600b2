"""`secure_start` (headless/launch.py): no key variable stays in the environment /proc/<pid>/environ shows, whoever
reads it, from the moment it returns — by overwriting the environment block in place (issue 29: no second
interpreter start), else by re-executing the interpreter as before. Both paths are checked on a live process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[1] / "server"
PROGRAM = """
import os, sys
print("started", flush=True)
from nagent_lsp.headless import launch
if sys.argv[1] == "refuse":
    launch.scrub_in_place = lambda secrets: False  # as where /proc/self/mem cannot be written
launch.secure_start(["nagent-lsp", "history", "x"])
from nagent_lsp.core.secret_env import process_environ
print("ready", process_environ().get("OPENAI_API_KEY"), "OPENAI_API_KEY" in os.environ, flush=True)
sys.stdin.read()
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/environ is Linux's")


def run_and_read_environ(mode: str, env: dict[str, str]) -> tuple[list[str], bytes]:
    """Start the program, wait for its "ready" line, read its /proc environ while it waits on stdin."""
    child = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONPATH": str(SERVER)},
    )
    assert child.stdout is not None and child.stdin is not None
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith("ready"):
            line = child.stdout.readline()
            assert line, f"the program ended early: {lines}"
            lines.append(line.strip())
        environ = Path(f"/proc/{child.pid}/environ").read_bytes()
    finally:
        child.stdin.close()
        child.wait(30)
    return lines, environ


@pytest.mark.parametrize("mode", ["in place", "refuse"])
def test_no_key_in_the_initial_environment(mode: str) -> None:
    key, token = f"sk-canary-{uuid.uuid4().hex}", f"ghp_{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env |= {"OPENAI_API_KEY": key, "GITHUB_TOKEN": token, "NAGENT_PROBE_VISIBLE": "plain-value-4711"}
    lines, environ = run_and_read_environ(mode, env)
    assert lines[-1] == f"ready {key} False"  # held in memory, out of os.environ
    for secret in (key, token, "OPENAI_API_KEY=", "GITHUB_TOKEN="):
        assert secret.encode() not in environ
    assert b"NAGENT_PROBE_VISIBLE=plain-value-4711\0" in environ  # the rest of the environment is intact
    # in place: one interpreter start; refused: the exec runs the program from the top a second time
    assert lines.count("started") == (1 if mode == "in place" else 2)
