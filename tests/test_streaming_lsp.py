"""The answer streams to the user while the model writes it (issue 23, contract A): `nagent/stream` notifications to
an LSP client that declared `experimental.nagent.stream`, live token counts and steps in every client's `$/progress`,
the CLI printing the answer as it comes; the conversation still gets each reply whole, once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, wait_until

GUARD = 60.0  # only a guard against a hang
ANSWER = "Added a docstring to add, and nothing else."
PIECES = ["<nagent-", "response>", "Added a ", "docstring ", "to add, ", "and nothing else.", "</nagent-response>"]


def make_repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("calc", {"calc.py": "def add(a, b):\n    return a + b\n"})])
    return workspace / "calc.py"


def opt_in(caps: Any) -> None:
    caps.experimental = {"nagent": {"stream": True}}


def streamed(editor: Any) -> list[dict]:
    """Every `nagent/stream` notification the client gets, in order (registered on the test's client)."""
    seen: list[dict] = []

    @editor.client.feature("nagent/stream")
    def on_stream(params: Any) -> None:
        seen.append(params if isinstance(params, dict) else params._asdict())  # pygls hands a namedtuple

    return seen


def progress_messages(editor: Any) -> list[str]:
    return [r.message for reports in editor.client.progress_reports.values() for r in reports if r.message]


async def test_deltas_reach_the_client_before_the_run_ends(workspace, isolated_home, fake_model, model_env):
    target = make_repo(workspace)
    fake_model.script({"text": "".join(PIECES), "chunks": PIECES, "hold_after": 4, "usage": [120, 30]})
    async with open_editor("vscode", workspace, isolated_home, env=model_env, patch_capabilities=opt_in) as editor:
        seen = streamed(editor)
        uri = editor.open(target)
        _, pending = editor.start_command("nagent.edit", {"uri": uri, "request": "add a docstring to add"})
        assert await wait_until(lambda: "".join(n["delta"] for n in seen) == "Added a docstring ", GUARD), seen
        assert not pending.done()  # the model is still writing: the answer so far is already on screen
        fake_model.release()
        result = await asyncio.wait_for(pending, GUARD)
        assert result["response"] == ANSWER
        await wait_until(lambda: seen and seen[-1].get("done"), GUARD)
    (token,) = list(editor.client.progress_reports)
    assert "".join(n["delta"] for n in seen) == ANSWER  # never a tag, nothing but the answer
    assert all(n["uri"] == uri and n["turn"] == 1 and n["token"] == token for n in seen)
    assert seen[-1] == {"token": token, "uri": uri, "delta": "", "turn": 1, "done": True}
    assert [n for n in seen if n.get("done")] == [seen[-1]]
    # The live figures: the reply's tokens counted as they came, then the server's own figures (150) after it.
    messages = progress_messages(editor)
    assert any(m.startswith("turn 1 · ") and m.endswith(" tokens · answering") for m in messages), messages
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert convo.count(ANSWER) == 1 and convo.count("<nagent-response>") == 1


async def test_every_reply_of_a_run_streams_and_steps_show_in_the_progress(
    workspace, isolated_home, fake_model, model_env
):
    target = make_repo(workspace)
    new_text = 'def add(a, b):\n    """Sum."""\n    return a + b\n'
    fake_model.script(
        text(f'<nagent-write path="{target}">\n{new_text}</nagent-write>'),
        text("<nagent-response>Done.</nagent-response>"),
    )
    async with open_editor("neovim", workspace, isolated_home, env=model_env, patch_capabilities=opt_in) as editor:
        seen = streamed(editor)
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "add a docstring to add"})
        assert result["applied"] is True and editor.text(target) == new_text
        await wait_until(lambda: [n["turn"] for n in seen if n.get("done")] == [1, 2], GUARD)
    assert "".join(n["delta"] for n in seen if n["turn"] == 1) == ""  # the write is no answer text
    assert "".join(n["delta"] for n in seen if n["turn"] == 2) == "Done."
    messages = progress_messages(editor)
    assert any(m.endswith("· writing calc.py") for m in messages), messages


async def test_a_client_that_did_not_opt_in_gets_no_stream_but_live_figures(workspace, editors, fake_model):
    target = make_repo(workspace)
    fake_model.script(
        text("<nagent-shell>pytest -q</nagent-shell>"), text(f"<nagent-response>{ANSWER}</nagent-response>")
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        seen = streamed(editor)
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "run the tests"})
        assert result["response"] == ANSWER
        messages = progress_messages(editor)
    assert seen == []
    assert any(m.startswith("turn 1 · ") and m.endswith("· running pytest") for m in messages), messages
    assert any(m.startswith("turn 2 · ") and "tokens" in m for m in messages), messages


def test_the_cli_prints_the_answer_as_it_comes(workspace, fake_model, model_env):
    """NAGENT_STREAM=1 makes the CLI stream as it does on a terminal; the answer is read from its stdout while the
    model still holds the rest of its reply, and is printed once."""
    make_repo(workspace)
    fake_model.script({"text": "".join(PIECES), "chunks": PIECES, "hold_after": 4})
    env = {**os.environ, **model_env, "NAGENT_STREAM": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "nagent_lsp", "edit", "calc.py", "add a docstring to add"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        got = b""
        while b"Added a docstring " not in got:
            byte = child.stdout.read(1)  # blocks until the CLI prints: no clock involved
            assert byte, f"the CLI ended before streaming: {got!r} {child.stderr.read()!r}"
            got += byte
        assert child.poll() is None  # still running: the model holds the rest of the reply
        fake_model.release()
        rest, err = child.communicate(timeout=GUARD)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    out = (got + rest).decode()
    assert out.count(ANSWER) == 1, out


def test_the_cli_does_not_stream_into_a_pipe_by_default(workspace, fake_model, model_env):
    make_repo(workspace)
    fake_model.script(text(f"<nagent-response>{ANSWER}</nagent-response>"))
    out = subprocess.run(
        [sys.executable, "-m", "nagent_lsp", "edit", "calc.py", "explain"],
        cwd=workspace,
        env={**os.environ, **model_env},
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"  # what a script reading stdout always got


async def test_runs_share_the_model_client_and_its_connection(workspace, isolated_home, fake_model, model_env):
    """A run no longer builds its own SDK client (25-55 ms before its first request, the CA bundle loaded each
    time): the next run on the server reuses the client, and its kept-alive connection."""
    target = make_repo(workspace)
    fake_model.script(*[{"text": f"<nagent-response>answer {i}</nagent-response>"} for i in range(3)])
    async with open_editor("neovim", workspace, isolated_home, env=model_env) as editor:
        uri = editor.open(target)
        for i in range(3):
            result = await editor.command("nagent.edit", {"uri": uri, "request": f"question {i}"})
            assert result["response"] == f"answer {i}"
    peers = [r.peer for r in fake_model.chat_requests]
    assert len(peers) == 3 and len(set(peers)) == 1, peers
