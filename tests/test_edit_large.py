"""An edit run on a 200 KB file goes through split segments and one file-patch, ending in minimal edits."""

from __future__ import annotations

import re
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

BODY = "".join(f"def function_{i}(value):\n    return value + {i}\n\n\n" for i in range(5000))


async def test_large_target_through_segments(workspace, editors, fake_model) -> None:
    assert len(BODY.encode()) > 200_000
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    target = workspace / "big.py"
    seen: dict[str, str] = {}

    def responder(request):
        last = request.messages[-1]["content"]
        if "<nagent-file-patch-result" in last:
            return "<nagent-response>patched function_7</nagent-response>"
        if 'mode="split"' in last:
            index = re.search(r"index_path: (\S+)", last).group(1)
            segment = re.search(r"- segment 1: lines \d+-\d+ at (\S+)", last).group(1)
            seen.update(index=index, segment=segment)
            text = Path(segment).read_text().replace("return value + 7\n", "return value * 7\n")
            return f'<nagent-write path="{segment}">\n{text}</nagent-write>\n<nagent-file-patch index="{index}"/>'
        return f'<nagent-file-read path="{target}"/>'

    fake_model.responder = responder
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "multiply in function_7"})
        assert result["applied"] is True, result
        assert editor.text(target) == BODY.replace("return value + 7\n", "return value * 7\n")
        assert result["edits"] == 1
        assert target.read_text() == BODY  # the disk file is the editor's business
    first_request = fake_model.chat_requests[0].messages[0]["content"]
    assert "function_4999" not in first_request  # a large target is not inlined in the context
    assert Path(seen["index"]).is_file()
    convo = Path(result["conversation"]["path"]).read_text()
    assert 'mode="split"' in convo and 'status="ok"' in convo and 'changed="true"' in convo


async def test_reading_a_large_file_twice_reuses_its_split(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    target = workspace / "big.py"
    read = f'<nagent-file-read path="{target}"/>'
    fake_model.script(text(read), text(read), text("<nagent-response>read twice</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "look"})
    assert result["response"] == "read twice"
    assert len(list((workspace / ".nagent" / "splits").iterdir())) == 1
    convo = Path(result["conversation"]["path"]).read_text()
    assert convo.count('mode="split"') == 2
