"""Issue 25, "the conversation is the chat": `nagent.conversation.send {uri}` runs the draft typed after the
conversation's last record (multi-line, unsaved) as the next request on the conversation's file;
`nagent.conversation.open` says where that draft is typed (`draftLine`)."""

from __future__ import annotations

from pathlib import Path

from pygls.exceptions import JsonRpcInvalidParams

from nagent_lsp.tags.draft import find_draft
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

ORIGINAL = "def add(a, b):\n    return a + b\n"
CHANGED = "def add(a, b):\n    return b + a\n"
DRAFT = "swap the operands\n\nand keep the <b>name</b> as it is"


def repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("init", {"calc.py": ORIGINAL})])
    return workspace / "calc.py"


def test_the_draft_is_what_follows_the_last_record() -> None:
    records = (
        "<user-prompt>\nfirst\n</user-prompt>\nmy own note between records\n"
        '<agent-response>\nok\n</agent-response>\n<nagent-turn-status utc="x" turn="1"/>\n'
    )
    found = find_draft(records + "\n  " + DRAFT + "\n\n")
    assert found.text == DRAFT and found.line == records.count("\n") + 1
    assert found.before == records  # the note between records stays, the draft goes
    empty = find_draft(records)
    assert empty.text == "" and empty.line == records.count("\n")
    assert find_draft("").line == 0 and find_draft("just typed").text == "just typed"


async def test_send_runs_the_draft_as_the_next_request(profile, workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text("<nagent-response>first answer</nagent-response>"))
    fake_model.script(
        text(f'<nagent-write path="{target}">\n{CHANGED}</nagent-write>'), text("<nagent-response>swapped")
    )
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        first = await editor.command("nagent.edit", {"uri": uri, "request": "look"})
        conversation = Path(first["conversation"]["path"])
        recorded = conversation.read_text(encoding="utf-8")
        opened = await editor.command("nagent.conversation.open", {"uri": uri})
        assert opened["draftLine"] == len(recorded.splitlines())  # the line after the last record
        # The user types a multi-line request at the end of the conversation buffer, unsaved.
        conversation_uri = editor.open(conversation, recorded + "\n" + DRAFT + "\n", language="nagentconv")
        reopened = await editor.command("nagent.conversation.open", {"uri": conversation_uri})
        assert reopened["path"] == str(conversation) and reopened["draftLine"] == recorded.count("\n") + 1
        result = await editor.command("nagent.conversation.send", {"uri": conversation_uri})
        assert result["request"] == DRAFT and result["applied"] is True and editor.text(target) == CHANGED
        assert result["message"].startswith("calc.py: applied 1 edit")
        editor.change(conversation, conversation.read_text(encoding="utf-8"))  # the client reloads what was written
        empty = await editor.command_error("nagent.conversation.send", {"uri": uri})
    assert isinstance(empty, JsonRpcInvalidParams)
    assert "type a request at the end of the conversation" in empty.message
    after = conversation.read_text(encoding="utf-8")
    assert after.startswith(recorded.rstrip())
    assert after.count(DRAFT) == 1 and f"<user-prompt>\n{DRAFT}\n</user-prompt>" in after  # taken out, then sent
    assert find_draft(after).text == ""
    sent = fake_model.chat_requests[-2].messages
    assert sent[-1]["content"].count("swap the operands") == 1  # the draft reached the model once


async def test_send_on_the_source_file_and_a_cli_free_conversation(workspace, editors, fake_model) -> None:
    """`uri` may name the source file: its conversation's draft (on disk when no buffer holds it) is sent."""
    target = repo(workspace)
    fake_model.script(text("<nagent-response>nothing to do</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        uri = editor.open(target)
        opened = await editor.command("nagent.conversation.open", {"uri": uri})
        assert opened["draftLine"] == 0  # an empty conversation: type on its first line
        Path(opened["path"]).write_text("explain add\n", encoding="utf-8")
        result = await editor.command("nagent.conversation.send", {"uri": uri, "agent": "explain"})
    assert result["request"] == "explain add" and result["response"] == "nothing to do"
    assert "<user-prompt>\nexplain add\n</user-prompt>" in Path(opened["path"]).read_text(encoding="utf-8")
