"""What the model is told is what the server does (issue 22): a rejected reply's note says how to read it back, and
a large file other than the target is called read-only only when a write to it would really be refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nagent_lsp.core.limits import INLINE_LIMIT
from nagent_lsp.tags.transcript import parse_blocks
from tests.harness.fake_openai import RecordedRequest, text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import repository_settings

PAD = "  # padding to make the module larger than the inline limit"
PROSE = "Here is my plan in words, without any protocol tag."


def sent(request: RecordedRequest) -> str:
    return "\n".join(m["content"] for m in request.messages)


async def test_a_rejected_reply_note_says_how_to_read_it_back(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("add", {"app.py": "x = 1\n"})])
    target = workspace / "app.py"
    told: dict[str, str] = {}

    def model(request: RecordedRequest) -> str:
        if not told:
            told["first"] = "yes"
            return PROSE  # rejected: no protocol tags
        pointer = re.search(r'<nagent-read path="([^"]+-invalid-1-[^"]+\.txt)"/>', sent(request))
        if "read" not in told and pointer:
            told["read"] = pointer.group(1)
            return pointer.group(0)  # the model does what the note says
        return "<nagent-response>done</nagent-response>"

    fake_model.responder = model
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "plan"})
    assert result["response"] == "done"
    sidecar = Path(told["read"])  # the correction named the sidecar inside a <nagent-read> the model can copy
    assert sidecar.parent.name == "outputs" and PROSE in sidecar.read_text(encoding="utf-8")
    correction = fake_model.chat_requests[1].messages[-1]["content"]
    assert "Attempt 1 of 3" in correction and f'<nagent-read path="{sidecar}"/>' in correction
    read_back = fake_model.chat_requests[2].messages[-1]["content"]
    assert PROSE in read_back and "error=" not in read_back  # and reading it back works
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert PROSE not in "".join(b.body or "" for b in parse_blocks(convo) if b.kind == "agent-response")


def big_module() -> str:
    lines = [f"VALUE_{i} = {i}{PAD}\n" for i in range(1200)]
    text_ = "".join(lines)
    assert len(text_.encode()) > INLINE_LIMIT
    return text_


@pytest.mark.parametrize("scope", ["workspace", "target"])
async def test_a_large_other_file_is_called_read_only_only_when_it_is(scope, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("add", {"app.py": "x = 1\n", "big.py": big_module()})])
    if scope == "target":
        repository_settings(workspace, {"writeScope": "target"})
    target = workspace / "app.py"
    fake_model.script(
        text('<nagent-file-read path="big.py"/>'),
        text(
            f'<nagent-replace path="big.py">\n<<<<<<< SEARCH\nVALUE_7 = 7{PAD}\n=======\nVALUE_7 = 70\n'
            ">>>>>>> REPLACE\n</nagent-replace>"
        ),
        text("<nagent-response>done</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "change VALUE_7"})
    assert result["response"] == "done"
    split_result = fake_model.chat_requests[1].messages[-1]["content"]
    replace_result = fake_model.chat_requests[2].messages[-1]["content"]
    assert 'mode="split"' in split_result
    if scope == "workspace":
        assert "read-only" not in split_result
        assert '<nagent-replace path="big.py">' in split_result and "only the target's segments" in split_result
        assert 'status="ok"' in replace_result  # what it was told holds: the write is accepted
    else:
        assert 'this file is read-only in this session (the writeScope setting is "target")' in split_result
        assert 'status="error"' in replace_result and 'writeScope setting is "target"' in replace_result
