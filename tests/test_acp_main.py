"""The workspace's main conversation over ACP (issue 24): a prompt naming no file binds to it; its writes form one
change set over workspace files (edit tool calls behind one permission), the write policy refuses `.git/`, the state
root and anything outside the workspace; it is listed, shared by every file-less session, and survives a restart."""

from __future__ import annotations

import json
from pathlib import Path

from acp import text_block

from tests.acp_client import acp_agent
from tests.harness.fake_openai import text
from tests.test_acp import APP, DONE, NEW_APP, make_repo, snapshot, write

NOTE = "# notes\n- add mul\n"


def main_convo(workspace: Path) -> Path:
    return workspace / ".nagent" / "conversations" / "_main"


def sent_text(fake_model, number: int) -> str:
    return "\n".join(str(m.get("content", "")) for m in fake_model.chat_requests[number].messages)


async def test_a_prompt_with_no_file_writes_a_change_set_of_workspace_files(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", NEW_APP) + write("docs/NOTES.md", NOTE)), DONE)
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("comment and note it")])
        assert answer.stop_reason == "end_turn", client.message_text()
        edits = client.tool_calls("edit")
        diffs = {Path(e.content[0].path).name: e.content[0] for e in edits}
        assert sorted(diffs) == ["NOTES.md", "app.py"]
        assert diffs["app.py"].old_text == APP and diffs["NOTES.md"].old_text is None
        assert len(client.permissions) == 1  # one request for the change set
    assert target.read_text() == NEW_APP and (workspace / "docs" / "NOTES.md").read_text() == NOTE
    first = sent_text(fake_model, 0)
    assert f"main conversation of {workspace.resolve()}" in first or f"main conversation of {workspace}" in first
    assert "file-edit target:" not in first and "<target-file" not in first
    convo = main_convo(workspace).read_text()
    assert "comment and note it" in convo and "Accepted and applied" in convo
    proposals = list((workspace / ".nagent" / "proposals").glob("*/proposal.json"))
    assert len(proposals) == 1 and json.loads(proposals[0].read_text())["status"] == "applied"


async def test_writes_to_git_the_state_root_or_outside_are_refused(
    workspace, isolated_home, model_env, fake_model
) -> None:
    make_repo(workspace)
    outside = workspace.parent / "outside.txt"
    attempts = write(".git/config", "[core]\n") + write("../outside.txt", "x\n") + write(".nagent/config.json", "{}\n")
    fake_model.script(text(attempts), DONE)
    before = snapshot(workspace)
    git_config = (workspace / ".git" / "config").read_bytes()
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("tamper")])
        assert answer.stop_reason == "end_turn"
        assert client.tool_calls("edit") == [] and client.permissions == []  # no change set at all
    assert snapshot(workspace) == before and (workspace / ".git" / "config").read_bytes() == git_config
    assert not outside.exists() and not (workspace / ".nagent" / "config.json").exists()
    told = sent_text(fake_model, 1)  # what the model read back after its writes
    assert told.count("write not allowed") >= 3
    assert "denyWrite" in told and "outside the workspace" in told and "state folder" in told


async def test_the_main_session_is_listed_shared_and_survives_a_restart(
    workspace, isolated_home, model_env, fake_model
) -> None:
    make_repo(workspace)
    first, second = (text(f"<nagent-response>{n} answer</nagent-response>") for n in ("first", "second"))
    fake_model.script(first, second)
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, _client, _):
        one = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=one.session_id, prompt=[text_block("what is here?")])
        listed = (await conn.list_sessions(cwd=str(workspace))).sessions
        assert [s.title for s in listed] == ["workspace — what is here?"]
        main_id = listed[0].session_id
        two = await conn.new_session(cwd=str(workspace), mcp_servers=[])  # a second file-less session: same one
        await conn.prompt(session_id=two.session_id, prompt=[text_block("and tests?")])
        again = (await conn.list_sessions(cwd=str(workspace))).sessions
        assert [(s.session_id, s.title) for s in again] == [(main_id, "workspace — and tests?")]
    convo = main_convo(workspace).read_text()
    assert "what is here?" in convo and "and tests?" in convo
    assert list(main_convo(workspace).parent.glob("_main*")) == [main_convo(workspace)]
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, client, _):  # a fresh process
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(workspace))).sessions] == [main_id]
        await conn.load_session(cwd=str(workspace), session_id=main_id, mcp_servers=[])
        users, agents = client.message_text("user_message_chunk"), client.message_text("agent_message_chunk")
    assert "what is here?" in users and "and tests?" in users
    assert "first answer" in agents and "second answer" in agents
