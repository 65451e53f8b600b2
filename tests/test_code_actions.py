"""The zero-plugin path: code actions on a `nagent:` comment, through the protocol."""

from __future__ import annotations

import ast

import pytest
from lsprotocol import types

from nagent_lsp.operations.instruction import instruction_at
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import wait_until

SOURCE = "import time\n\n\ndef fetch(url):\n    # nagent: add retries with backoff\n    return get(url)\n"


@pytest.mark.parametrize(
    "line,expected",
    [
        ("    # nagent: add retries", "add retries"),
        ("// NAGENT: rename x", "rename x"),
        ("-- nagent: use a CTE", "use a CTE"),
        ("/* nagent: inline this */", "inline this"),
        ("<!-- nagent: add alt text -->", "add alt text"),
        (";; nagent: use pcase", "use pcase"),
        ("x = 1  # nagent: not at line start", None),
        ("# nagent:", None),
        ("print('nagent: text in a string')", None),
    ],
)
def test_instruction_comment_syntax(line, expected) -> None:
    assert instruction_at(line) == expected


async def actions(editor, uri: str, line: int, end_char: int = 0) -> list[types.CodeAction]:
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(line, 0), types.Position(line, end_char)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    return await editor.client.text_document_code_action_async(params)


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_apply_instruction_edits_and_removes_comment(profile, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    retry_loop = (
        "    for attempt in range(3):\n        try:\n            return get(url)\n"
        "        except OSError:\n            time.sleep(2 ** attempt)\n"
    )
    with_retries = SOURCE.replace("    return get(url)\n", retry_loop)
    fake_model.script(
        text(f'<nagent-write path="{target}">\n{with_retries}</nagent-write>'),
        text("<nagent-response>added</nagent-response>"),
    )
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        found = await actions(editor, uri, 4)
        apply = [a for a in found if a.title.startswith("nagent: apply this instruction")]
        assert len(apply) == 1
        assert not await_titles(await actions(editor, uri, 3), "nagent: apply this instruction")
        name, arguments = command_of(apply[0])
        result = await editor.command(name, *arguments)
        assert result == {"started": True, "command": "nagent.instruction.apply"}  # no plugin: answered at once
        expected = with_retries.replace("    # nagent: add retries with backoff\n", "")
        assert await wait_until(lambda: editor.text(target) == expected), editor.text(target)
        assert "add retries with backoff" in fake_model.chat_requests[0].messages[-1]["content"]
        assert len(editor.recorded.apply_edits) == 1  # the change and the comment's removal are one edit

        missing = await editor.command_error("nagent.instruction.apply", {"uri": uri, "line": 0})
        assert "no `nagent:` comment" in missing.message


async def test_selection_and_split_actions_offered(workspace, editors) -> None:
    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    async with editors.open("vscode", workspace) as editor:
        uri = editor.open(target)
        titles = [a.title for a in await actions(editor, uri, 3, 5)]
        # offered only to a client that can supply the request (tests/test_code_actions_zero_plugin.py)
        assert "nagent: edit selection" not in titles
        assert "nagent: split this file into segments" in titles
        split = await editor.command("nagent.split", {"uri": uri})
        titles = [a.title for a in await actions(editor, uri, 0)]
        assert "nagent: merge edited segments back (patch)" in titles
        assert split["indexPath"]


def command_of(action) -> tuple[str, list]:
    """pygls' client structures a CodeAction carrying a command as a bare Command whose `command` field is
    the stringified command object (a client-side union quirk); read it back either way."""
    if isinstance(action, types.CodeAction):
        return action.command.command, list(action.command.arguments or [])
    if isinstance(action.command, str) and action.command.startswith("{"):
        inner = ast.literal_eval(action.command)
        return inner["command"], inner.get("arguments", [])
    return action.command, list(action.arguments or [])


def await_titles(found, prefix):
    return [a for a in found if a.title.startswith(prefix)]
