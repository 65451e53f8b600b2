"""Memory under conversation.tokenBudget (DESIGN §11): the oldest turns fold into one <conversation-summary>."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.memory import SUMMARY, fresh_tokens, plan_fold
from nagent_lsp.core.model import estimate_tokens
from nagent_lsp.tags.transcript import (
    agent_response_block,
    append_blocks,
    attempt_block,
    render_block,
    set_initial_context,
    system_block,
    user_prompt_block,
)
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import repository_settings


def turn(i: int) -> list[str]:
    return [agent_response_block(f'<nagent-read path="f{i}.py"/>'), render_block("nagent-read-result", f"body {i}")]


def test_plan_keeps_the_context_and_the_last_two_turns_and_the_current_request() -> None:
    text = set_initial_context("", "rules")
    text = append_blocks(text, [user_prompt_block("first request"), *turn(1), user_prompt_block("second"), *turn(2)])
    assert plan_fold(text) is None  # two turns: nothing may go
    text = append_blocks(text, turn(3))
    plan = plan_fold(text)
    assert plan is not None
    folded = "\n".join(b.raw for b in plan.folded)
    assert "first request" in folded and "body 1" in folded and "body 2" not in folded
    assert plan.prompt is not None and "second" in plan.prompt.raw  # the newest request, kept verbatim
    assert text[plan.end :].startswith("<agent-response>") and "body 2" in text[plan.end :]
    assert "rules" not in folded


def failed_run(i: int) -> list[str]:
    """A run whose three attempts were rejected: the replies are in outputs/, their notes in the file."""
    notes = [attempt_block(f"run {i}: no protocol tags (Attempt {a} of 3.)", a) for a in (1, 2, 3)]
    return [user_prompt_block(f"request {i}"), *notes, system_block("still malformed after 3 attempts")]


def test_failed_attempts_are_turns_that_fold() -> None:
    text = append_blocks(set_initial_context("", "rules"), failed_run(1))
    plan = plan_fold(text)
    assert plan is not None  # three rejected attempts: the first may go, the last two stay
    assert [b.attr("attempt") for b in plan.folded if b.kind == "system"] == ["1"]
    assert text[plan.end :].startswith('<system attempt="2">') and "still malformed" in text[plan.end :]
    assert plan.prompt is not None and "request 1" in plan.prompt.raw
    text = append_blocks(text, failed_run(2))
    plan = plan_fold(text)
    assert plan is not None and "run 2: no protocol tags (Attempt 1" in "\n".join(b.raw for b in plan.folded)
    assert plan.prompt is not None and "request 2" in plan.prompt.raw


def test_fresh_tokens_leave_out_earlier_memory_and_the_kept_request() -> None:
    memory = [system_block("3 earlier turn(s) were folded"), render_block(SUMMARY, "m" * 4000)]
    text = append_blocks(set_initial_context("", "rules"), [*memory, *failed_run(1)])
    plan = plan_fold(text)
    assert plan is not None
    folded = {b.raw for b in plan.folded}
    assert memory[1] in folded and memory[0] in folded  # folded again with the rest, so memory stays one block...
    turn = attempt_block("run 1: no protocol tags (Attempt 1 of 3.)", 1)
    assert fresh_tokens(plan) == estimate_tokens(turn)  # ...but only the turn is what the fold takes away


async def test_a_conversation_folds_under_a_small_budget(workspace, editors, fake_model) -> None:
    files = {f"m{i}.py": f"MODULE_{i} = '{'x' * 3000}'\n" for i in range(4)}
    build_repo(workspace, [Commit("add", {"app.py": "x = 1\n", **files})])
    repository_settings(workspace, {"conversation": {"tokenBudget": 2500}})
    target = workspace / "app.py"
    fake_model.script(
        text('<nagent-read path="m0.py"/>'),
        text('<nagent-read path="m1.py"/>'),
        text('<nagent-read path="m2.py"/>'),
        text("MEMORY: the user asked to look at modules; m0.py holds MODULE_0.", usage=(4000, 20)),
        text("<nagent-response>looked</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "look at the modules"})
    assert result["response"] == "looked"
    assert result["tokens"]["memory"] == 4020 and result["tokens"]["turns"] == 4
    requests = fake_model.chat_requests
    assert len(requests) == 5
    fold_request = requests[3].messages
    assert "MODULE_0" in fold_request[-1]["content"] and "MODULE_2" not in fold_request[-1]["content"]
    last = "\n".join(m["content"] for m in requests[4].messages)
    assert "MEMORY: the user asked" in last and "MODULE_0 =" not in last  # folded away
    assert "MODULE_1 =" in last and "MODULE_2 =" in last  # the last two turns stay
    assert "look at the modules" in last  # the request being worked on stays verbatim
    convo_path = Path(result["conversation"]["path"])
    convo = convo_path.read_text()
    assert "<conversation-summary" in convo and "MODULE_0 =" not in convo
    archives = [p for p in convo_path.parent.iterdir() if p.name.startswith(convo_path.name + "-")]
    assert len(archives) == 1 and "MODULE_0 =" in archives[0].read_text()
    assert str(archives[0]) in convo  # the fold is recorded with its archive
