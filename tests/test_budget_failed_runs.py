"""conversation.tokenBudget holds when runs fail (issue 22): a model that answers prose, never a protocol tag, fails
every run after its corrections; those corrections are turns for memory (DESIGN §11), so the oldest fold into a
<conversation-summary> and the request the model is sent stops growing."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.memory import FOLD_ASK
from nagent_lsp.core.model import estimate_tokens
from nagent_lsp.tags.transcript import parse_blocks
from tests.harness.fake_openai import RecordedRequest
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import repository_settings

BUDGET = 1000
RUNS = 40
SUMMARY = "MEMORY: the user keeps asking about app.py; the model answered in prose and nothing ran."
PROSE = "I believe the function should be renamed, and the tests updated to match. " * 4


def is_fold(request: RecordedRequest) -> bool:
    return bool(request.messages) and request.messages[0]["content"] == FOLD_ASK


class Model:
    """Answers prose (never a protocol tag) until `done`; a fold request gets the summary."""

    def __init__(self) -> None:
        self.done = False

    def __call__(self, request: RecordedRequest) -> str:
        if is_fold(request):
            return SUMMARY
        return "<nagent-response>done</nagent-response>" if self.done else PROSE


def request_tokens(request: RecordedRequest) -> int:
    """What the request weighs by the code's own estimate (agent.memory.messages_tokens: ceil(chars/4) a message)."""
    return sum(estimate_tokens(m["content"]) for m in request.messages)


async def test_the_budget_holds_over_forty_failed_runs(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("add", {"app.py": "def f():\n    return 1\n"})])
    repository_settings(workspace, {"conversation": {"tokenBudget": BUDGET}})
    target = workspace / "app.py"
    fake_model.responder = model = Model()
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        for run in range(RUNS):
            error = await editor.command_error(
                "nagent.edit", {"uri": editor.uri(target), "request": f"rename f, attempt {run:02d}"}
            )
            assert "malformed after 3 attempts" in error.message
        model.done = True
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "last"})
    assert result["response"] == "done"
    requests = fake_model.chat_requests
    folds = [r for r in requests if is_fold(r)]
    calls = [r for r in requests if not is_fold(r)]
    assert len(calls) == RUNS * 3 + 1
    assert folds, "no fold happened"
    context = max(estimate_tokens(r.messages[0]["content"]) for r in calls)  # the initial context: never folded
    sizes = [request_tokens(r) for r in calls]
    # What memory can fold (everything but the initial context) stays within the budget on every call...
    assert max(s - estimate_tokens(r.messages[0]["content"]) for s, r in zip(sizes, calls, strict=True)) <= BUDGET
    assert max(sizes) <= context + BUDGET
    # ...and the request of the last runs is no larger than that of the first ones: nothing accumulates.
    assert max(sizes[-30:]) <= max(sizes[:30])
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert len(convo) < 4 * (context + BUDGET)  # the file too (it was 59 KB after these 40 runs, and grew on)
    summaries = [b for b in parse_blocks(convo) if b.kind == "conversation-summary"]
    assert len(summaries) == 1 and SUMMARY in (summaries[0].body or "")
    path = Path(result["conversation"]["path"])
    archives = [p for p in path.parent.iterdir() if p.name.startswith(path.name + "-")]
    assert archives  # folded text is archived first, never lost
    assert "rename f, attempt 00" in "".join(p.read_text(encoding="utf-8") for p in archives)
