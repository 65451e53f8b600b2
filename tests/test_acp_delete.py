"""ACP `session/delete` (issue 24): advertised because it is routed (SDK 0.12.1 has no route of its own: see
acp/delete_route.py), and it archives, never removes: the conversation is moved aside byte for byte, the session is
no longer listed nor loadable, and a new prompt on the file starts a fresh conversation."""

from __future__ import annotations

import pytest
from acp import RequestError

from tests.acp_client import acp_agent
from tests.harness.fake_openai import text
from tests.test_acp import make_repo, prompt_for

DONE = text("<nagent-response>nothing to change</nagent-response>")


async def test_delete_archives_the_conversation(workspace, isolated_home, model_env, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(DONE, DONE)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, answer):
        caps = answer.model_dump(by_alias=True, exclude_none=True)["agentCapabilities"]["sessionCapabilities"]
        assert "delete" in caps
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "look at add"))
        listed = await conn.list_sessions(cwd=str(workspace))
        (info,) = listed.sessions
        folder = workspace / ".nagent" / "conversations"
        (convo,) = [p for p in folder.glob("app-*") if p.is_file()]
        before = convo.read_bytes()
        assert b"look at add" in before
        await conn._conn.send_request("session/delete", {"sessionId": info.session_id})
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []
        archived = [p for p in folder.glob(f"{convo.name}-*") if p.is_file()]
        assert len(archived) == 1 and archived[0].read_bytes() == before  # never removed: moved aside whole
        with pytest.raises(RequestError):
            await conn.load_session(cwd=str(workspace), session_id=info.session_id, mcp_servers=[])
        with pytest.raises(RequestError):
            await conn._conn.send_request("session/delete", {"sessionId": "no-such-session"})
        again = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=again.session_id, prompt=prompt_for(target, "a fresh start"))
        (fresh,) = (await conn.list_sessions(cwd=str(workspace))).sessions
        assert fresh.session_id == info.session_id  # the same file, a new conversation
        text_now = convo.read_text()
        assert "a fresh start" in text_now and "look at add" not in text_now
