"""`nagent-lsp acp` driven by the ACP SDK's own client (tests/acp_client.py) against the scripted model: initialize,
sessions bound to a file's conversation, change sets as edit tool calls behind one permission request, fs/* only
when advertised, rejection and the client's own review recorded in the conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import RequestError, resource_link_block, text_block

from tests.acp_client import acp_agent
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

APP = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
TEST = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
NEW_APP = APP.replace("return a + b", "return a + b  # sum").replace("return a - b", "return a - b  # difference")
NEW_TEST = TEST + "\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
NEW_MOD = "VALUE = 1\n"
DONE = text("<nagent-response>done: added the tests</nagent-response>")


def write(path: str, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


def make_repo(workspace: Path) -> Path:
    build_repo(
        workspace,
        [
            Commit("app", {"app.py": APP, "test_app.py": TEST}),
            Commit("touch", {"app.py": APP, "test_app.py": TEST + "\n"}),
        ],
    )
    (workspace / "test_app.py").write_text(TEST, encoding="utf-8")
    return workspace / "app.py"


def script_three_files(fake_model) -> None:
    fake_model.script(
        text(write("app.py", NEW_APP) + write("test_app.py", NEW_TEST) + write("pkg/new_mod.py", NEW_MOD)), DONE
    )


def prompt_for(path: Path, request: str) -> list:
    return [text_block(request), resource_link_block(path.name, path.as_uri())]


def snapshot(workspace: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(workspace)): p.read_bytes()
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and ".git" not in p.parts and ".nagent" not in p.parts
    }


async def test_initialize_advertises_what_exists(workspace, isolated_home, model_env) -> None:
    async with acp_agent(workspace, isolated_home, model_env) as (_conn, _client, answer):
        wire = answer.model_dump(by_alias=True, exclude_none=True)
        caps = wire["agentCapabilities"]
        assert wire["protocolVersion"] == 1
        assert caps["loadSession"] is True
        assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
        assert set(caps["sessionCapabilities"]) == {"list", "resume", "close", "delete"}  # no fork: not implemented
        assert [m["type"] for m in wire["authMethods"]] == ["terminal"]
        assert wire["authMethods"][0]["args"] == ["acp", "--setup"]
        assert wire["agentInfo"]["name"] == "nagent-lsp"


async def test_change_set_is_three_edit_tool_calls_and_writes_through_the_client(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    script_three_files(fake_model)
    async with acp_agent(workspace, isolated_home, model_env, fs=True) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "test sub too"))
        assert answer.stop_reason == "end_turn"
        edits = client.tool_calls("edit")
        assert len(edits) == 3, edits
        diffs = {Path(e.content[0].path).name: e.content[0] for e in edits}
        assert diffs["new_mod.py"].old_text is None and diffs["new_mod.py"].new_text == NEW_MOD
        assert diffs["app.py"].old_text == APP and diffs["app.py"].new_text == NEW_APP
        assert diffs["test_app.py"].old_text == TEST
        app_call = next(e for e in edits if Path(e.content[0].path).name == "app.py")
        assert app_call.locations[0].line == 2  # 1-based: the first changed line
        assert len(client.permissions) == 1
        options = {o.option_id: o.kind for o in client.permissions[0][1]}
        assert options["apply"] == "allow_once" and options["reject"] == "reject_once"
        assert len(options) == 5  # + "Apply only F" for each of the three files
        writes = sorted(Path(p).name for kind, p in client.fs_calls if kind == "write")
        assert writes == ["app.py", "new_mod.py", "test_app.py"]
        assert target.read_text() == NEW_APP and (workspace / "pkg" / "new_mod.py").read_text() == NEW_MOD
        assert "done: added the tests" in client.message_text()
        # the proposal is on disk, resolved: the CLI and nagent.review.* see the same record
        proposals = list((workspace / ".nagent" / "proposals").glob("*/proposal.json"))
        assert len(proposals) == 1 and json.loads(proposals[0].read_text())["status"] == "applied"


async def test_rejected_permission_changes_no_byte_and_is_recorded(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    script_three_files(fake_model)
    before = snapshot(workspace)
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, client, _):
        client.answers = ["reject"]
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "test sub too"))
        assert answer.stop_reason == "end_turn"
        assert len(client.permissions) == 1
    assert snapshot(workspace) == before
    assert client.fs_calls == []  # fs/* never called when the client did not advertise it
    convo = next((workspace / ".nagent" / "conversations").glob("app-*")).read_text()
    assert "<nagent-review-result" in convo and "Rejected by the user" in convo and "def test_sub" in convo


async def test_without_client_fs_the_engine_writes_and_fs_is_never_called(
    workspace, isolated_home, model_env, fake_model
) -> None:
    target = make_repo(workspace)
    script_three_files(fake_model)
    async with acp_agent(workspace, isolated_home, model_env, fs=False) as (conn, client, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=session.session_id, prompt=prompt_for(target, "test sub too"))
        assert answer.stop_reason == "end_turn"
    assert client.fs_calls == []
    assert target.read_text() == NEW_APP and (workspace / "test_app.py").read_text() == NEW_TEST
    assert (workspace / "pkg" / "new_mod.py").read_text() == NEW_MOD


async def test_a_malformed_request_is_an_error_naming_the_field(workspace, isolated_home, model_env) -> None:
    make_repo(workspace)
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, _):
        with pytest.raises(RequestError) as relative:
            await conn.new_session(cwd="relative/path", mcp_servers=[])
        assert relative.value.data["field"] == "cwd" and "absolute" in relative.value.data["message"]
        with pytest.raises(RequestError) as unknown:
            await conn.set_config_option(config_id="colour", session_id="nope", value="red")
        assert "nope" in json.dumps(unknown.value.data)
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        with pytest.raises(RequestError) as option:
            await conn.set_config_option(config_id="colour", session_id=session.session_id, value="red")
        assert option.value.data["field"] == "configId"
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []  # still answering
