"""Agents (DESIGN §10) through the protocol: the list and its sources, `agent` on an edit, permissions, trust."""

from __future__ import annotations

import json
from pathlib import Path

from pygls.exceptions import JsonRpcInvalidParams

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor

ORIGINAL = "def greet(name):\n    return 'hi ' + name\n"
CHANGED = "def greet(name):\n    return f'hello {name}'\n"


def repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("init", {"app.py": ORIGINAL})])
    return workspace / "app.py"


def agent_file(folder: Path, name: str, front: str, body: str = "Be brief.") -> Path:
    path = folder / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front.strip()}\n---\n{body}\n", encoding="utf-8")
    return path


def write(path: Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


def convo_of(result: dict) -> str:
    return Path(result["conversation"]["path"]).read_text(encoding="utf-8")


async def test_list_shows_builtin_user_and_workspace_agents(workspace, isolated_home) -> None:
    repo(workspace)
    user = agent_file(isolated_home / ".nagent", "reviewer", "description: Reviews without editing")
    mine = agent_file(workspace / ".nagent", "tester", "description: Writes tests\nmodel: fast")
    agent_file(workspace / ".nagent", "broken", "description: [unclosed")
    agent_file(workspace / ".nagent", "loose", "description: x\npermissions:\n  shell: sometimes")
    async with open_editor("eglot", workspace, isolated_home) as editor:
        listed = await editor.command("nagent.agents.list", {})
        again = await editor.command("nagent.agents.list", {"uri": editor.uri(workspace / "app.py")})
        error = await editor.command_error("nagent.edit", {"uri": editor.uri(workspace / "app.py"), "request": "x"})
    by_name = {a["name"]: a for a in listed["agents"]}
    assert {n: by_name[n]["source"] for n in ("edit", "plan", "explain", "reviewer", "tester")} == {
        "edit": "builtin",
        "plan": "builtin",
        "explain": "builtin",
        "reviewer": "user",
        "tester": "workspace",
    }
    assert by_name["reviewer"]["path"] == str(user) and by_name["tester"]["path"] == str(mine)
    assert "path" not in by_name["edit"] and by_name["tester"]["description"] == "Writes tests"
    assert "broken" not in by_name and "loose" not in by_name
    problems = listed["problems"]
    assert any("broken.md" in p and "'front matter'" in p and "malformed YAML" in p for p in problems)
    assert any("loose.md" in p and "permissions.shell" in p and "allow, ask or deny" in p for p in problems)
    assert again == listed
    assert "No model configured" in error.message  # no model: the same error as before agents existed


async def test_denied_write_is_refused_with_the_reason_and_the_agent_block(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    agent_file(
        workspace / ".nagent",
        "reviewer",
        "description: Reviews\npermissions:\n  write:\n    'docs/**': allow\n    '*': deny",
        "Only comment on the code; never change it.",
    )
    fake_model.script(text(write(target, CHANGED)), text("<nagent-response>looks fine</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command(
            "nagent.edit", {"uri": editor.uri(target), "request": "review", "agent": "reviewer"}
        )
        assert editor.text(target) == ORIGINAL
        assert not editor.recorded.apply_edits
    assert result["applied"] is False and result["response"] == "looks fine"
    convo = convo_of(result)
    assert "write not allowed: agent 'reviewer' may not write" in convo and "pattern '*': deny" in convo
    system = fake_model.chat_requests[0].messages[0]["content"]
    assert '{agent name="reviewer"}' in system and "never change it" in system


async def test_plan_applies_nothing_and_answers(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(
        text(write(target, CHANGED) + "\n<nagent-shell>echo RAN_IT</nagent-shell>"),
        text("<nagent-response>1. switch greet to an f-string</nagent-response>"),
    )
    async with editors.open("eglot", workspace, model=True, init_options={"shell": "allow"}) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "how?", "agent": "plan"})
        assert not editor.recorded.apply_edits and editor.text(target) == ORIGINAL
    assert result["applied"] is False and result["response"].startswith("1. switch")
    convo = convo_of(result)
    assert "agent 'plan' may not write" in convo
    assert "RAN_IT" not in convo.split("</nagent-shell>")[-1] and "shell command denied by agent 'plan'" in convo
    assert '{agent name="plan"}' in fake_model.chat_requests[0].messages[0]["content"]


async def test_unknown_agent_is_invalid_params(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    async with editors.open("neovim", workspace, model=True) as editor:
        error = await editor.command_error(
            "nagent.edit", {"uri": editor.uri(target), "request": "x", "agent": "nobody"}
        )
    assert isinstance(error, JsonRpcInvalidParams)
    assert "unknown agent 'nobody'" in error.message and "plan" in error.message
    assert not fake_model.chat_requests


async def test_workspace_agent_cannot_widen_shell_deny_a_user_agent_can(
    workspace, isolated_home, fake_model, model_env
) -> None:
    target = repo(workspace)
    config = isolated_home / ".nagent" / "config.json"
    config.write_text(json.dumps({"shell": "deny", "history": {"summarize": False}}), encoding="utf-8")
    open_shell = "description: Runs things\npermissions:\n  shell: allow"
    agent_file(workspace / ".nagent", "cloned", open_shell)
    agent_file(isolated_home / ".nagent", "mine", open_shell)
    # The repository's own config cannot grant the shell either.
    (workspace / ".nagent" / "config.json").write_text(json.dumps({"shell": "allow"}), encoding="utf-8")
    run = "<nagent-shell>echo SHELL_$((40+2))</nagent-shell>"
    fake_model.script(
        *[entry for name in "abc" for entry in (text(run), text(f"<nagent-response>{name}</nagent-response>"))]
    )
    async with open_editor("vscode", workspace, isolated_home, env=model_env) as editor:
        editor.open(target)
        uri = editor.uri(target)
        cloned = last_run(await editor.command("nagent.edit", {"uri": uri, "request": "run", "agent": "cloned"}))
        plain = last_run(await editor.command("nagent.edit", {"uri": uri, "request": "run"}))
        mine = last_run(await editor.command("nagent.edit", {"uri": uri, "request": "run", "agent": "mine"}))
    assert "SHELL_42" not in cloned and "a workspace agent cannot widen the user's settings" in cloned
    assert "SHELL_42" not in plain and "nagent.shell is 'deny'" in plain
    assert "SHELL_42" in mine and "allowed by agent 'mine'" not in mine  # the reason is not shown when it ran


def last_run(result: dict) -> str:
    return convo_of(result).split("<user-prompt>")[-1]


async def test_agent_comment_and_plan_comment_stays(workspace, editors, fake_model) -> None:
    source = "# nagent(plan): how would you speed this up?\n" + ORIGINAL
    build_repo(workspace, [Commit("init", {"app.py": source})])
    target = workspace / "app.py"
    fake_model.script(text("<nagent-response>cache it</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        actions = await editor.client.text_document_code_action_async(_code_action_params(uri))
        titles = [a.title for a in actions]
        assert any(t.startswith("nagent: apply this instruction with agent plan") for t in titles), titles
        result = await editor.command("nagent.instruction.apply", {"uri": uri, "line": 0})
        assert editor.text(target) == source  # plan: not even the comment is removed
    assert result["response"] == "cache it" and result["applied"] is False
    assert '{agent name="plan"}' in fake_model.chat_requests[0].messages[0]["content"]


def _code_action_params(uri: str):
    from lsprotocol import types

    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[]),
    )


async def test_conversation_permission_denies_a_sub_conversation(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    agent_file(workspace / ".nagent", "solo", "description: Works alone\npermissions:\n  conversation: deny")
    fake_model.script(
        text("<nagent-conversation>say CHILD</nagent-conversation>"), text("<nagent-response>alone</nagent-response>")
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "agent": "solo"})
    assert result["response"] == "alone" and len(fake_model.chat_requests) == 2
    assert "not run: agent 'solo' may not start a sub-conversation" in convo_of(result)
