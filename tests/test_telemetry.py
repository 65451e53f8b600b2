"""Truthful turn telemetry (DESIGN §11): stripped and fabricated replies are counted, and a stripped reply's raw
text is kept in a sidecar under outputs/ that the turn status points to and the model can read back."""

from __future__ import annotations

import re
from pathlib import Path

from nagent_lsp.tags.transcript import last_turn_status, parse_blocks, parse_turn_status
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo


async def test_turn_status_counts_a_stripped_and_a_fabricated_turn(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("add", {"app.py": "x = 1\n"})])
    target = workspace / "app.py"
    found: dict[str, str] = {}

    def read_back(request) -> str:
        sent = "\n".join(m["content"] for m in request.messages)
        path = re.search(r'<nagent-read path="([^"]+\.txt)"/>', sent)
        if "raw-read" not in found and path:
            found["raw-read"] = path.group(1)
            return f'<nagent-read path="{path.group(1)}"/>'
        return "<nagent-response>done</nagent-response>"

    fake_model.script(
        text('Let me look first.\n<nagent-read path="app.py"/>'),
        text('<nagent-read path="app.py"/>\n<nagent-read-result path="app.py">\nx = 1\n</nagent-read-result>'),
    )
    fake_model.responder = read_back
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "look"})
    assert result["response"] == "done"
    convo = Path(result["conversation"]["path"]).read_text()
    statuses = [parse_turn_status(b) for b in parse_blocks(convo) if b.kind == "nagent-turn-status"]
    assert [(s.stripped_turns, s.fabricated_turns) for s in statuses] == [(1, 0), (2, 1), (2, 1), (2, 1)]
    last = last_turn_status(convo)
    assert last is not None and (last.stripped_turns, last.fabricated_turns) == (2, 1)
    sidecar = Path(statuses[0].raw or "")
    assert sidecar.parent.name == "outputs" and "Let me look first." in sidecar.read_text()
    assert statuses[1].raw is not None and "<nagent-read-result" in Path(statuses[1].raw).read_text()
    responses = [b.body or "" for b in parse_blocks(convo) if b.kind == "agent-response"]
    assert not any("Let me look first." in r for r in responses)  # the conversation records the cleaned turn only
    # The model was told where the raw reply is, and reading it back works (outputs/ is the server's own).
    assert found["raw-read"] == str(sidecar)
    read_result = fake_model.chat_requests[3].messages[-1]["content"]
    assert "Let me look first." in read_result and "error=" not in read_result
