"""`nagent.edit` end to end: the real server, a real git repository, the real openai SDK against a local model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.harness.fake_openai import slow, text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import MODEL_KEY, repository_settings, wait_until

ORIGINAL = "import os\n\n\ndef greet(name):\n    return 'hi ' + name\n\n\ndef main():\n    print(greet('x'))\n"
UNSAVED = ORIGINAL.replace("def main():", "def main():  # unsaved note")
NEIGHBOUR = "HELPER_CONSTANT = 42\n"


def make_repo(workspace: Path) -> Path:
    build_repo(
        workspace,
        [
            Commit(
                "add app",
                {"app.py": ORIGINAL, "helper.py": NEIGHBOUR, ".env": "SECRET_TOKEN=do-not-leak\n"},
                author="Ann",
                email="ann@example.com",
            ),
            Commit("tweak helper", {"helper.py": NEIGHBOUR + "# more\n"}, author="Bob", email="bob@example.com"),
        ],
    )
    return workspace / "app.py"


def write(path: Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


def conversation_text(result: dict) -> str:
    return Path(result["conversation"]["path"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("profile", ["vscode", "eglot"])
async def test_read_write_answer_applies_minimal_edit(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    new_text = UNSAVED.replace("return 'hi ' + name", "return f'hello {name}'")
    fake_model.script(
        text('<nagent-read path="helper.py"/>'),
        text(write(target, new_text)),
        text("<nagent-response>Switched greet to an f-string.</nagent-response>"),
    )
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target, UNSAVED)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "use an f-string"})
        assert result["applied"] is True, result
        assert editor.text(target) == new_text
        assert target.read_text() == ORIGINAL  # never written behind the editor's back
        assert result["edits"] == 1
        edit = editor.recorded.apply_edits[-1].edit
        changes = edit.document_changes or []
        assert changes or edit.changes
        sent = changes[0].edits if changes else next(iter(edit.changes.values()))
        assert len(sent) == 1 and "hello" in sent[0].new_text and "import os" not in sent[0].new_text
        assert result["response"] == "Switched greet to an f-string."
        assert result["tokens"]["turns"] == 3 and result["tokens"]["input"] > 0
        assert Path(result["patchPath"]).read_text().count("+    return f'hello {name}'") == 1

    convo = conversation_text(result)
    assert convo.startswith("<initial_context>")
    assert "<user-prompt>\nuse an f-string\n</user-prompt>" in convo
    assert "<nagent-read-result" in convo and "HELPER_CONSTANT = 42" in convo
    assert "<nagent-write-result" in convo and 'status="ok"' in convo
    assert "Switched greet to an f-string." in convo
    # What the model saw: the system message first, the unsaved buffer in it, the neighbour's text in a user turn.
    first, second = fake_model.chat_requests[0].messages, fake_model.chat_requests[1].messages
    assert first[0]["role"] == "system" and "# unsaved note" in first[0]["content"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "HELPER_CONSTANT" in second[-1]["content"]
    assert all(MODEL_KEY not in json.dumps(r.body) for r in fake_model.chat_requests)
    assert MODEL_KEY not in convo


async def test_refusals_are_recorded_and_nothing_leaks(workspace, editors, fake_model, tmp_path) -> None:
    target = make_repo(workspace)
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE_SECRET\n")
    (workspace / "link.txt").symlink_to(outside)
    other = workspace / "helper.py"
    repository_settings(workspace, {"writeScope": "target"})  # the target's rule: a neighbour is refused
    fake_model.script(
        text(
            '<nagent-read path=".env"/>\n<nagent-read path="../outside.txt"/>\n<nagent-read path="link.txt"/>\n'
            + write(other, "hijacked\n")
        ),
        text("<nagent-response>could not</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "read secrets"})
    assert result["applied"] is False and result["reason"] == "no change"
    assert other.read_text() == NEIGHBOUR + "# more\n"
    convo = conversation_text(result)
    assert convo.count("read refused") == 3
    assert "write not allowed" in convo
    sent = json.dumps([r.body for r in fake_model.chat_requests])
    assert "do-not-leak" not in sent and "OUTSIDE_SECRET" not in sent


async def test_malformed_reply_corrected_then_exhausted(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(
        text('<nagent-write path="app.py">never closed'),
        text("<nagent-response>ok after correction</nagent-response>"),
    )
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "first"})
        assert result["response"] == "ok after correction"
        assert '<system attempt="1">' in conversation_text(result)  # the correction: a turn for memory
        second = fake_model.chat_requests[1].messages
        assert "rejected" in second[-1]["content"]

        fake_model.script(text("just prose"), text('<nagent-write path="x">'), text("more prose"))
        error = await editor.command_error("nagent.edit", {"uri": editor.uri(target), "request": "second"})
        assert "malformed after 3 attempts" in error.message
        assert len(editor.recorded.apply_edits) == 0
        assert editor.text(target) == ORIGINAL


async def test_hand_edit_of_conversation_reaches_next_request(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text("<nagent-response>one</nagent-response>"), text("<nagent-response>two</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        first = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "first request"})
        convo_path = Path(first["conversation"]["path"])
        convo_path.write_text(convo_path.read_text() + "\nUSER NOTE: always use tabs\n")
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "second request"})
        # An unsaved edit of the open conversation buffer counts too.
        editor.open(convo_path, convo_path.read_text() + "\nBUFFER NOTE: prefer pathlib\n", language="plaintext")
        fake_model.script(text("<nagent-response>three</nagent-response>"))
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "third request"})
    second_sent = json.dumps(fake_model.chat_requests[1].messages)
    assert "USER NOTE: always use tabs" in second_sent and "first request" in second_sent
    assert "BUFFER NOTE: prefer pathlib" in json.dumps(fake_model.chat_requests[2].messages)


async def test_two_concurrent_edits_of_one_file_land_in_order(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)

    def responder(request):
        last = request.messages[-1]["content"]
        if "<nagent-write-result" in last:
            return "<nagent-response>done</nagent-response>"
        marker = "FIRST" if "request one" in last else "SECOND"
        current = ORIGINAL if marker == "FIRST" else ORIGINAL.replace("import os", "import os  # FIRST")
        line = "import os  # FIRST" if marker == "FIRST" else "import os  # FIRST SECOND"
        return write(target, current.replace(current.splitlines()[0], line))

    fake_model.responder = responder
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        one = editor.command("nagent.edit", {"uri": editor.uri(target), "request": "request one"})
        two = editor.command("nagent.edit", {"uri": editor.uri(target), "request": "request two"})
        first, second = await asyncio.gather(one, two)
        assert first["applied"] and second["applied"], (first, second)
        assert editor.text(target).splitlines()[0] == "import os  # FIRST SECOND"
    convo = conversation_text(first)
    assert convo.index("request one") < convo.index("request two")
    assert convo.count("<user-prompt>") == 2


@pytest.mark.parametrize("how", ["cancelRequest", "progress"])
async def test_slow_model_cancelled(how, workspace, editors, fake_model) -> None:
    """Cancelling stops a run whose model reply never comes: the reply is held for an hour, so only the
    cancellation can end it (a minute's bound keeps a broken cancellation from hanging the suite)."""
    target = make_repo(workspace)
    fake_model.script(slow(3600, "<nagent-response>late</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        request_id, pending = editor.start_command("nagent.edit", {"uri": editor.uri(target), "request": "slow"})
        await asyncio.to_thread(fake_model.wait_for_requests, 1, 60)
        (token,) = list(editor.client.progress_reports)
        if how == "cancelRequest":
            editor.cancel_request(request_id)
        else:
            editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        try:
            outcome = await asyncio.wait_for(pending, 60)
        except TimeoutError:
            raise AssertionError("the cancelled run did not answer") from None
        except Exception as exc:  # a cancelled request may answer with an error
            outcome = exc
        if isinstance(outcome, dict):
            assert outcome["applied"] is False and outcome["reason"] == "cancelled"
        # The run has really stopped once its progress ends: the interruption is recorded before that.
        reports = editor.client.progress_reports[token]
        await wait_until(lambda: reports[-1].kind == "end")
        assert reports[-1].kind == "end" and reports[-1].message == "cancelled"
        convo = workspace / ".nagent" / "conversations"
        texts = [p.read_text() for p in convo.iterdir() if p.is_file() and p.name != "file-index.json"]
        assert any(t.rstrip().endswith("Interrupted...") for t in texts)
        assert (await editor.command("nagent.status"))["version"]
        assert len(fake_model.chat_requests) == 1


async def test_no_model_fails_fast_naming_the_setting(workspace, editors) -> None:
    target = make_repo(workspace)
    async with editors.open("neovim", workspace) as editor:
        editor.open(target)
        error = await editor.command_error("nagent.edit", {"uri": editor.uri(target), "request": "anything"})
        assert "OPENAI_API_KEY" in error.message and "baseUrl" in error.message
        bad = await editor.command_error("nagent.edit", {"uri": editor.uri(target)})
        assert bad.code == -32602 and "request" in bad.message
