"""`shellTimeout` bounds the whole shell action (DESIGN §12, issue 12 item 5), through the real server process.

Children that keep the output pipe open (`setsid sleep & echo started`), `setsid -f` daemons and a foreground
command that never ends: the run goes on, the result says what happened and how long it really took, and none of
those processes outlives the action. Each is run with the shell's PID namespace (where the system allows it) and
without it (the fallback: process group + environment tag).

Processes are recognised from outside by a marker variable in their environment (PIDs inside a namespace mean
nothing out here). Every command here would run for an hour: only the server stopping them ends them sooner, and
every wait is bounded only so that a failure does not hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from nagent_lsp.agent.shell import namespace_prefix
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, wait_until

HOUR = "sleep 3600"
GONE_GUARD = 60.0  # seconds a killed process may take to disappear before the test calls it alive (it takes ms)


def marked(marker: str) -> list[int]:
    """Living (non-zombie) processes whose environment holds MARK=`marker`."""
    needle = f"MARK={marker}".encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read() + b"\0"
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in environ and state != b"Z":
            found.append(int(entry))
    return found


@contextlib.contextmanager
def markers(count: int):
    """Unique markers; whatever still carries one when the test ends is killed (a failing test leaves nothing)."""
    names = [f"nagent-test-{uuid.uuid4().hex}" for _ in range(count)]
    try:
        yield names
    finally:
        for name in names:
            for pid in marked(name):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


async def all_gone(names: list[str]) -> bool:
    return await wait_until(lambda: not any(marked(n) for n in names), timeout=GONE_GUARD)


def project(workspace: Path) -> Path:
    build_repo(workspace, [Commit("init", {"mod.py": "x = 1\n"})])
    return workspace / "mod.py"


def shell(command: str) -> dict:
    return text(f"<nagent-shell>{command}</nagent-shell>")


def results(convo: str) -> list[str]:
    return re.findall(r"<nagent-shell-result>\n(exit_code:.*?)</nagent-shell-result>", convo, re.S)


@pytest.fixture(params=["namespace", "off"])
async def isolation_env(request: pytest.FixtureRequest, model_env: dict) -> dict:
    if request.param == "namespace":
        if await namespace_prefix() is None:
            pytest.skip("no PID namespaces here (the fallback is the 'off' case)")
        return dict(model_env)
    return {**model_env, "NAGENT_LSP_SHELL_ISOLATION": "off"}


async def test_marker_scan_sees_a_marked_process(tmp_path: Path) -> None:
    """The check the tests below rely on finds a living marked process, and stops finding it once it is dead."""
    with markers(1) as (name,):
        proc = subprocess.Popen(["sleep", "3600"], env={**os.environ, "MARK": name})
        try:
            # Until the child has exec'd, /proc/<pid>/environ is still the parent's (no MARK): wait for the exec.
            await wait_until(lambda: bool(marked(name)), timeout=GONE_GUARD)
            assert marked(name) == [proc.pid]
        finally:
            proc.kill()
            proc.wait()
        assert marked(name) == []


async def test_children_holding_the_pipe_do_not_outlive_the_command(
    isolation_env: dict, workspace: Path, isolated_home: Path, fake_model
) -> None:
    target = project(workspace)
    with markers(3) as names:
        pipe_holder, daemon, nohup = names
        fake_model.script(
            shell(f"MARK={pipe_holder} setsid {HOUR} & echo started"),
            shell(
                f"MARK={daemon} setsid -f sh -c 'echo up > daemon.txt; exec {HOUR}';"
                " until [ -s daemon.txt ]; do sleep 0.01; done; echo detached"
            ),
            shell(f"MARK={nohup} nohup {HOUR} >/dev/null 2>&1 & disown; echo left"),
            text("<nagent-response>done</nagent-response>"),
        )
        settings = {"shell": "allow"}  # the default shellTimeout (120 s): these commands end by themselves at once
        async with open_editor("vscode", workspace, isolated_home, env=isolation_env, init_options=settings) as editor:
            editor.open(target)
            result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "start things"})
        assert await all_gone(names), {n: marked(n) for n in names}
    assert result["response"] == "done"
    assert (workspace / "daemon.txt").read_text() == "up\n"  # the daemon did start
    found = results(Path(result["conversation"]["path"]).read_text(encoding="utf-8"))
    assert len(found) == 3
    for body, said in zip(found, ("started", "detached", "left"), strict=True):
        assert body.startswith("exit_code: 0\n") and f"output:\n{said}" in body, body
        assert "processes the command left running in the background were stopped" in body, body
        assert "timed out" not in body, body


async def test_timeout_cuts_off_a_command_whose_children_hold_the_pipe(
    isolation_env: dict, workspace: Path, isolated_home: Path, fake_model
) -> None:
    """The issue's case: the command never ends and a child in a session of its own holds the pipe. The result
    comes at the timeout, says how long it really took, and a second edit on the same file is not held up."""
    target = project(workspace)
    with markers(3) as names:
        holder, daemon, foreground = names
        command = (
            f"MARK={holder} setsid {HOUR} & MARK={daemon} setsid -f {HOUR}; echo started; MARK={foreground} {HOUR}"
        )
        fake_model.script(
            shell(command),
            text("<nagent-response>first done</nagent-response>"),
            text("<nagent-response>second done</nagent-response>"),
        )
        settings = {"shell": "allow", "shellTimeout": 2}
        async with open_editor("eglot", workspace, isolated_home, env=isolation_env, init_options=settings) as editor:
            editor.open(target)
            uri = editor.uri(target)
            _, first = editor.start_command("nagent.edit", {"uri": uri, "request": "run it"})
            await asyncio.to_thread(fake_model.wait_for_requests, 1, 60)
            _, second = editor.start_command("nagent.edit", {"uri": uri, "request": "then this"})
            # Both answer although the command would run for an hour; the bound only stops a hang.
            a, b = await asyncio.wait_for(asyncio.gather(first, second), 120)
        assert await all_gone(names), {n: marked(n) for n in names}
    assert (a["response"], b["response"]) == ("first done", "second done")
    (body,) = results(Path(a["conversation"]["path"]).read_text(encoding="utf-8"))[:1]
    match = re.search(r"timed out after ([\d.]+) s \(shellTimeout is 2 s\)", body)
    assert match, body
    elapsed = float(match.group(1))
    assert 2 <= elapsed < 3600  # the real time: at least the timeout, and not the hour the command asked for
    assert f"elapsed: {match.group(1)} s" in body
    assert "output:\nstarted" in body
