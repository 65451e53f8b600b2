"""ACP sessions over nagent's conversations: list survives a rename, load replays the file (a hand edit too),
cancel mid-turn, usage_update with a priced profile, /history, and the client's own review read back."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from acp import resource_link_block, text_block

from tests.acp_client import acp_agent, wait_for
from tests.harness.fake_openai import text
from tests.harness.lsp import server_env
from tests.test_acp import APP, DONE, make_repo, prompt_for, snapshot, write

TWO_HUNKS = APP.replace("return a + b", "return a + b  # sum").replace("return a - b", "return a - b  # difference")


async def _one_run(conn, workspace: Path, target: Path, request: str = "comment the returns") -> str:
    session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
    answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, request))
    assert answer.stop_reason == "end_turn"
    return session.session_id


async def test_a_session_survives_a_rename(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", TWO_HUNKS)), DONE, DONE)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, _):
        await _one_run(conn, workspace, target)
        listed = (await conn.list_sessions(cwd=str(workspace))).sessions
        assert len(listed) == 1 and listed[0].title == "app.py — comment the returns"
        before = listed[0]
        assert before.field_meta["nagent"]["fileId"] == before.session_id
        renamed = workspace / "calc.py"
        os.rename(target, renamed)
        await _one_run(conn, workspace, renamed, "and now?")
        after = (await conn.list_sessions(cwd=str(workspace))).sessions
    assert [s.session_id for s in after] == [before.session_id]
    assert after[0].title == "calc.py — and now?"


async def test_load_replays_the_file_including_a_hand_edit(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", TWO_HUNKS)), DONE)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, _):
        await _one_run(conn, workspace, target, "comment the returns\nplease")
        session_id = (await conn.list_sessions(cwd=str(workspace))).sessions[0].session_id
    convo = next((workspace / ".nagent" / "conversations").glob("app-*"))
    convo.write_text(convo.read_text().replace("done: added the tests", "done: EDITED BY HAND"), encoding="utf-8")
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):  # a fresh process
        await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        users = client.message_text("user_message_chunk")
        agents = client.message_text("agent_message_chunk")
        tools = client.tool_calls()
    assert "comment the returns\nplease" in users
    assert "done: EDITED BY HAND" in agents and "added the tests" not in agents
    assert all(t.status == "completed" for t in tools)
    assert any(t.kind == "edit" for t in tools)  # the edit result (applied, patch) as a completed tool call


async def test_load_of_an_unknown_session_is_an_error_and_the_agent_lives(workspace, isolated_home, model_env) -> None:
    make_repo(workspace)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, _):
        try:
            await conn.load_session(cwd=str(workspace), session_id="9:9", mcp_servers=[])
        except Exception as exc:  # the SDK raises RequestError
            assert "9:9" in str(exc) or "not found" in str(exc).lower()
        else:
            raise AssertionError("loading an unknown session succeeded")
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []


async def test_cancel_mid_turn_gives_cancelled_and_writes_nothing(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    fake_model.script({"delay": 60, "text": write("app.py", TWO_HUNKS)})
    before = snapshot(workspace)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        run = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "go")))
        assert await wait_for(lambda: len(fake_model.chat_requests) >= 1)
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(run, 30)
        assert answer.stop_reason == "cancelled"
        assert client.permissions == [] and client.fs_calls == [("read", str(target))]
    assert snapshot(workspace) == before


async def test_cancel_while_asking_permission_applies_nothing(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", TWO_HUNKS)), DONE)
    before = snapshot(workspace)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        client.hold = asyncio.Event()
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        run = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "go")))
        await asyncio.wait_for(client.asked.wait(), 60)
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(run, 30)
        client.hold.set()
        assert answer.stop_reason == "cancelled"
    assert snapshot(workspace) == before
    # the proposal is still pending: `nagent-lsp review` lists it and can apply it later
    record = json.loads(next((workspace / ".nagent" / "proposals").glob("*/proposal.json")).read_text())
    assert record["status"] == "pending"
    listed = subprocess.run(
        [sys.executable, "-m", "nagent_lsp", "review", "list"],
        cwd=workspace,
        env=server_env(isolated_home, model_env),
        capture_output=True,
        text=True,
        check=True,
    )
    assert [p["id"] for p in json.loads(listed.stdout)["proposals"]] == [record["id"]]


async def test_usage_update_carries_the_cost_of_a_priced_profile(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    config = {
        "history": {"summarize": False},
        "models": {"priced": {"model": "fake-model", "price": {"input": 2.0, "output": 8.0}}},
        "model": "priced",
    }
    (isolated_home / ".nagent" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    fake_model.script(text(write("app.py", TWO_HUNKS), usage=(1000, 100)), text(DONE["text"], usage=(2000, 50)))
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        await _one_run(conn, workspace, target)
        usage = client.of_kind("usage_update")
    assert usage, client.updates
    cost = (3000 * 2.0 + 150 * 8.0) / 1_000_000
    assert usage[-1].cost is not None and usage[-1].cost.currency == "USD"
    assert abs(usage[-1].cost.amount - cost) < 1e-9
    assert usage[-1].size == 60000 and usage[-1].used > 0


async def test_history_command_answers_the_history_card(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert await wait_for(lambda: client.of_kind("available_commands_update"))
        names = {c.name for c in client.of_kind("available_commands_update")[0].available_commands}
        assert {"history", "coedits", "review", "accept", "reject", "recipe", "agent"} <= names
        prompt = [text_block("/history"), resource_link_block("app.py", target.as_uri())]
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt)
        assert answer.stop_reason == "end_turn"
    shown = client.message_text()
    assert "app.py" in shown and "Commits (newest first):" in shown and "Alice Example: app" in shown
    assert fake_model.chat_requests == []  # a command, not a model run


async def test_a_hunk_the_client_reverted_is_recorded_at_the_next_prompt(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", TWO_HUNKS)), DONE, DONE)
    async with acp_agent(workspace, isolated_home, model_env, fs=True) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "comment the returns"))
        assert client.buffers[str(target)] == TWO_HUNKS
        # the user rejects the second hunk in the editor's own review (Zed's per-hunk reject)
        client.buffers[str(target)] = APP.replace("return a + b", "return a + b  # sum")
        await conn.prompt(session_id=session.session_id, prompt=[text_block("thanks")])
    convo = next((workspace / ".nagent" / "conversations").glob("app-*")).read_text()
    assert 'source="client"' in convo and 'reverted="h2"' in convo and 'kept="h1"' in convo
    sent = json.dumps(fake_model.chat_requests[-1].messages)
    assert "Reverted by the user in the editor: h2" in sent


async def test_a_file_outside_the_workspace_is_refused_and_nothing_is_read(
    workspace, isolated_home, model_env, fake_model, tmp_path
) -> None:
    make_repo(workspace)
    outside = tmp_path / "secret.py"
    outside.write_text("KEY = 1\n", encoding="utf-8")
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(outside, "read it"))
        assert answer.stop_reason == "end_turn"
        assert "outside" in client.message_text().lower() or "not inside" in client.message_text().lower()
        assert client.fs_calls == []
    assert fake_model.chat_requests == []


async def test_a_shell_command_under_ask_is_a_permission_request_of_kind_execute(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    fake_model.script(text("<nagent-shell>echo from-the-shell</nagent-shell>"), DONE)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        client.answers = ["o2"]  # the third option: Deny
        await _one_run(conn, workspace, target, "run it")
    call, options = client.permissions[0]
    assert call.kind == "execute" and "echo from-the-shell" in json.dumps(call.raw_input)
    assert [(o.name, o.kind) for o in options] == [
        ("Run once", "allow_once"),
        ("Always", "allow_always"),
        ("Deny", "reject_once"),
    ]
    sent = json.dumps(fake_model.chat_requests[-1].messages)
    assert "the user denied this shell command" in sent


async def test_the_answer_streams_as_agent_message_chunks(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    answer = "<nagent-response>first part, second part, third part</nagent-response>"
    fake_model.script(
        text(answer, chunks=["<nagent-response>first part,", " second part,", " third part</nagent-", "response>"])
    )
    async with acp_agent(workspace, isolated_home, model_env) as (conn, client, _):
        await _one_run(conn, workspace, target, "explain")
    chunks = [u.content.text for u in client.of_kind("agent_message_chunk")]
    assert len(chunks) >= 2, chunks  # streamed, not one block at the end
    assert "".join(chunks).strip() == "first part, second part, third part"  # once, without the tags
    assert not [t for t in client.tool_calls() if t.title.startswith("turn ")]  # live figures are no steps
    # what the model was given, before the answer: the history (search) and the target file (read)
    kinds = {t.title.split(" ")[0]: t.kind for t in client.tool_calls()}
    assert kinds["history:"] == "search" and kinds["read"] == "read"
    history = next(t for t in client.tool_calls() if t.title.startswith("history:"))
    assert history.title == "history: 1 commit, 1 co-edit row"
    order = [getattr(u, "session_update", "") for _s, u in client.updates]
    assert order.index("tool_call") < order.index("agent_message_chunk")
