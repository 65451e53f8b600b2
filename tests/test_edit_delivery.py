"""How an edit reaches the buffer: merges, conflicts, encodings, stale versions, confirmation, progress."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import MODEL_KEY, repository_settings

LINES = [f"line {i} = {i}\n" for i in range(20)]
BASE = "".join(LINES)


def repo(workspace: Path, content: str = BASE) -> Path:
    build_repo(workspace, [Commit("init", {"mod.py": content})])
    return workspace / "mod.py"


def write(path: Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


DONE = text("<nagent-response>done</nagent-response>")
ALLOW_SHELL = {"shell": "allow"}


class HeldReply:
    """The model's first reply, held back until the test has changed the buffer (then every later request gets
    `then`): the user types while the model is still thinking."""

    def __init__(self, first: str, then: dict):
        self.first, self.then = first, then
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, request) -> str | dict:
        self.calls += 1
        if self.calls > 1:
            return self.then
        self.release.wait(60)  # a bound for a test that fails before releasing it
        return self.first


async def change_while_the_model_thinks(editor, fake_model, target: Path, model_text: str, users: str) -> dict:
    held = fake_model.responder = HeldReply(write(target, model_text), DONE)
    try:
        _, pending = editor.start_command("nagent.edit", {"uri": editor.uri(target), "request": "change"})
        await asyncio.to_thread(fake_model.wait_for_requests, 1, 60)
        editor.change(target, users)
        await editor.command("nagent.status")  # answered after the change above was taken in
    finally:
        held.release.set()
    return await asyncio.wait_for(pending, 60)


async def test_buffer_changed_during_run_is_merged(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    model_text = BASE.replace("line 15 = 15", "line 15 = 'model'")
    users = BASE.replace("line 2 = 2", "line 2 = 'user'")
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await change_while_the_model_thinks(editor, fake_model, target, model_text, users)
        assert result["applied"] is True, result
        assert editor.text(target) == users.replace("line 15 = 15", "line 15 = 'model'")


async def test_conflicting_buffer_change_applies_nothing(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    model_text = BASE.replace("line 5 = 5", "line 5 = 'model'")
    users = BASE.replace("line 5 = 5", "line 5 = 'user'")
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await change_while_the_model_thinks(editor, fake_model, target, model_text, users)
        assert result["applied"] is False and "conflict" in result["reason"]
        assert editor.text(target) == users
        assert not editor.recorded.apply_edits


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_positions_right_for_non_ascii(profile, workspace, editors, fake_model) -> None:
    content = "naïve = 'café'\nemoji = '😀😀 x'  # 𝄞 clef\ntail = 1\n"
    target = repo(workspace, content)
    wanted = content.replace("😀😀 x'  # 𝄞 clef", "😀😀 y'  # 𝄞 clef 🎵").replace("tail = 1", "tail = 'ü'")
    fake_model.script(text(write(target, wanted)), DONE)
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "unicode"})
        assert result["applied"] is True, result
        assert editor.text(target) == wanted
        assert result["edits"] >= 1
        if profile == "eglot":
            assert editor.encoding == "utf-32"  # the captured Emacs profile prefers it; the server must honour it


async def test_rejected_versioned_edit_retried_once(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text(write(target, BASE.replace("line 1 = 1", "line 1 = 'x'"))), DONE)
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        editor.reject_edits = 1  # the first applyEdit is refused, as eglot does when its didChange lags
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
        assert result["applied"] is True, result
        assert len(editor.recorded.apply_edits) == 2
        assert "line 1 = 'x'" in editor.text(target)


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_preview_and_confirm_edits_wait_for_review(profile, workspace, editors, fake_model) -> None:
    """DESIGN §9: no change annotation, no showMessageRequest; the change is a proposal until nagent.review.apply."""
    target = repo(workspace)
    repository_settings(workspace, {"confirmEdits": True})
    fake_model.script(text(write(target, BASE + "extra = 1\n")), DONE)
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "a"})
        assert result["applied"] is False and result["reason"] == "awaiting review"
        assert not editor.recorded.apply_edits and not editor.recorded.message_requests
        applied = await editor.command("nagent.review.apply", {"id": result["proposal"]["id"]})
        assert applied["applied"] is True and editor.text(target).endswith("extra = 1\n")
        edit = editor.recorded.apply_edits[0].edit
        assert not edit.change_annotations


async def test_progress_begin_report_end(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text(write(target, BASE + "x = 1\n")), DONE)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "p"})
        (reports,) = editor.client.progress_reports.values()
        kinds = [r.kind for r in reports]
        assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
        assert any("turn 1" in (r.message or "") for r in reports if r.kind == "report")


@pytest.mark.parametrize(
    "mode,profile,answer,ran",
    [
        ("ask", "vscode", "Run once", True),
        ("ask", "vscode", "Deny", False),
        ("ask", "eglot", None, False),  # eglot 1.9 cannot be asked: deny
        ("deny", "vscode", None, False),
        ("allow", "eglot", None, True),
    ],
)
async def test_shell_permission(mode, profile, answer, ran, workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text("<nagent-shell>echo SHELL_$((40+2))</nagent-shell>"), DONE)
    # The editor grants "allow" (initializationOptions: a server with that setting); "ask" and "deny" are set in
    # the repository's config, which a shared server reads when the folder becomes its workspace.
    if mode != "allow":
        repository_settings(workspace, {"shell": mode})
    init_options = ALLOW_SHELL if mode == "allow" else None
    async with editors.open(profile, workspace, model=True, init_options=init_options) as editor:
        editor.open(target)
        if answer:
            editor.answers = [answer]
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "run"})
        asked = len(editor.recorded.message_requests)
    convo = Path(result["conversation"]["path"]).read_text()
    assert ("SHELL_42" in convo) is ran
    assert asked == (1 if (mode == "ask" and profile == "vscode") else 0)
    if not ran:
        assert "not run:" in convo
    assert MODEL_KEY not in convo


async def test_sub_conversation_rolls_up_tokens(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(
        text("<nagent-conversation>say CHILD_ANSWER</nagent-conversation>"),
        text("<nagent-response>CHILD_ANSWER</nagent-response>", usage=(100, 10)),
        text("<nagent-response>parent done</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "delegate"})
    convo = Path(result["conversation"]["path"]).read_text()
    assert "<nagent-conversation-result" in convo and "CHILD_ANSWER" in convo
    assert result["tokens"]["input"] >= 100
    children = [p for p in (workspace / ".nagent" / "conversations").iterdir() if p.name.startswith("child-")]
    assert len(children) == 1 and "say CHILD_ANSWER" in children[0].read_text()
    # The child's conversation is isolated: the parent's prompt is not in it.
    assert "delegate" not in children[0].read_text().split("</initial_context>")[1]


async def test_next_continues_and_max_steps_bounds_the_run(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text("<nagent-next>check the header</nagent-next>"), DONE)
    repository_settings(workspace, {"maxSteps": 3})
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "go"})
        assert result["response"] == "done" and result["tokens"]["turns"] == 2
        next_input = "<nagent-next-input>\ncheck the header\n</nagent-next-input>"
        assert next_input in fake_model.chat_requests[1].messages[-1]["content"]

        fake_model.responder = lambda request: "<nagent-next>again</nagent-next>"
        bounded = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "loop forever"})
        assert bounded["tokens"]["turns"] == 3 and "maxSteps=3" in bounded["reason"]


async def test_sub_conversations_stop_at_the_depth_limit(workspace, editors, fake_model) -> None:
    target = repo(workspace)

    def responder(request):
        last = request.messages[-1]["content"]
        if "<nagent-conversation-result" in last:
            return "<nagent-response>unwound</nagent-response>"
        level = int(last.rsplit("level ", 1)[1].split()[0]) if "level " in last else 0
        return f"<nagent-conversation>level {level + 1}</nagent-conversation>"

    fake_model.responder = responder
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "start"})
    assert result["response"] == "unwound"
    children = sorted(p for p in (workspace / ".nagent" / "conversations").iterdir() if p.name.startswith("child-"))
    assert len(children) == 2  # depth 1 and 2 ran; the third level was refused
    texts = "".join(p.read_text() for p in children)
    assert "may nest at most 2 deep" in texts


async def test_api_key_never_reaches_the_conversation_or_the_model(workspace, editors, fake_model) -> None:
    """The shell cannot see the key variable, and even reading the server's own environment yields nothing."""
    target = repo(workspace)
    snoop = (
        "echo var=${OPENAI_API_KEY:-unset}; tr '\\0' '\\n' < /proc/$PPID/environ | grep OPENAI_API_KEY; "
        "ps -o pid= -p $PPID"
    )
    fake_model.script(text(f"<nagent-shell>{snoop}</nagent-shell>"), DONE)
    async with editors.open("eglot", workspace, model=True, init_options=ALLOW_SHELL) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "snoop"})
    convo = Path(result["conversation"]["path"]).read_text()
    assert "var=unset" in convo
    key = MODEL_KEY
    assert key not in convo  # and nothing to redact: no command can see the key (tests/test_secrets.py)
    assert all(key not in str(r.body) for r in fake_model.chat_requests)
    outputs = workspace / ".nagent" / "outputs"
    assert not outputs.exists() or all(key not in p.read_text(errors="replace") for p in outputs.iterdir())


def test_a_delivery_on_the_wire_is_camel_case_without_its_outcome() -> None:
    from nagent_lsp.config.convert import to_wire
    from nagent_lsp.core.ports import ApplyOutcome
    from nagent_lsp.operations.apply import FileResult
    from nagent_lsp.operations.deliver import Delivery
    from nagent_lsp.operations.review import ProposalView
    from nagent_lsp.store.proposals import ConversationRecord

    files = [FileResult("file:///a.py", 2, False)]
    applied = Delivery(True, 2, files, patchPath="/p.patch", outcome=ApplyOutcome(True, final_text="secret text"))
    assert to_wire(applied) == {
        "applied": True,
        "edits": 2,
        "files": [{"uri": "file:///a.py", "edits": 2, "created": False}],
        "patchPath": "/p.patch",
    }
    view = ProposalView("p1", "2025-01-01T00:00:00Z", "", ConversationRecord("/c.md", "f1"), [])
    proposed = Delivery(False, reason="awaiting review", proposal=view, reviewRequired=["a.sh is executable"])
    assert to_wire([proposed]) == [
        {
            "applied": False,
            "edits": 0,
            "files": [],
            "reason": "awaiting review",
            "proposal": {
                "id": "p1",
                "createdAt": "2025-01-01T00:00:00Z",
                "request": "",
                "conversation": {"path": "/c.md", "fileId": "f1"},
                "files": [],
            },
            "reviewRequired": ["a.sh is executable"],
        }
    ]
