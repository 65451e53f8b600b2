"""Token figures (DESIGN §4.1, §11): cacheRead from the provider, cost from the profile's price, the estimate of a
cancelled call, and appends that cost what they append."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from lsprotocol import types

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.config.convert import to_wire
from nagent_lsp.core.model import Message, Usage
from nagent_lsp.llm.tokens import Tokens
from tests.harness.fake_openai import slow, text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import wait_until


def make_repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("add", {"app.py": "x = 1\n"})])
    return workspace / "app.py"


def test_tokens_result_carries_cache_memory_and_cost() -> None:
    tokens = Tokens(price=(2.0, 8.0), memory_price=(1.0, 1.0))
    tokens.add(Usage(1000, 100, cache_read=600))
    assert to_wire(tokens.counts()) == {
        "input": 1000,
        "output": 100,
        "turns": 1,
        "cacheRead": 600,
        "memory": 0,
        "cost": 0.0028,
    }
    tokens.add_memory(Usage(500, 50))
    counted = to_wire(tokens.counts())
    assert counted["memory"] == 550 and counted["cost"] == round(0.0028 + 550 / 1e6, 6)
    unpriced = Tokens()
    unpriced.add(Usage(10, 1))
    assert "cost" not in to_wire(unpriced.counts())
    cancelled = Tokens()
    cancelled.add_unanswered([Message("system", "x" * 6200)])
    assert cancelled.input == 1550 and cancelled.estimated


def test_appends_append_and_rewrites_stay_atomic(tmp_path: Path) -> None:
    path = tmp_path / "convo"
    convo = ConversationFile.open(path)
    convo.set_context("rules")  # a rewrite: atomic
    for i in range(50):
        convo.append(f"<user-prompt>\nrequest {i}\n</user-prompt>")
    assert convo.appends == 50 and convo.rewrites == 1
    assert path.read_text() == convo.text
    # Someone changed the file behind our back: the next save writes the whole text again, then appends go on.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\nuser note\n")
    convo.append("<system>\nafter\n</system>")
    assert convo.rewrites == 2 and path.read_text() == convo.text
    convo.append("<system>\nmore\n</system>")
    assert convo.appends == 51 and path.read_text() == convo.text
    # A fresh open of the file appends from the start.
    again = ConversationFile.open(path)
    again.append("<system>\nreopened\n</system>")
    assert again.appends == 1 and again.rewrites == 0 and path.read_text().endswith("reopened\n</system>")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


async def test_cache_read_and_cost_for_a_priced_profile(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    # The user's own profile (their editor's settings): a repository may only pick among the user's profiles.
    priced = {"model": "priced", "models": {"priced": {"model": "fake-model", "price": {"input": 2, "output": 8}}}}
    fake_model.script(
        text(
            '<nagent-write path="app.py">\nx = 2\n</nagent-write>',
            usage={"prompt_tokens": 1000, "completion_tokens": 20, "cached_tokens": 0},
        ),
        text(
            "<nagent-response>done</nagent-response>",
            usage={"prompt_tokens": 1100, "completion_tokens": 10, "cached_tokens": 900},
        ),
    )
    async with editors.open("vscode", workspace, model=True, init_options=priced) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "two"})
    tokens = result["tokens"]
    assert tokens["input"] == 2100 and tokens["output"] == 30 and tokens["cacheRead"] == 900
    assert tokens["memory"] == 0
    assert tokens["cost"] == round((2100 * 2 + 30 * 8) / 1e6, 6)
    assert all(r.body["model"] == "fake-model" for r in fake_model.chat_requests)
    convo = Path(result["conversation"]["path"]).read_text()
    assert 'cache_read_total="900"' in convo


async def test_no_price_no_cost(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text("<nagent-response>ok</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
    assert "cost" not in result["tokens"] and result["tokens"]["cacheRead"] == 0


async def test_a_cancelled_call_counts_what_it_sent(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(slow(3600, "<nagent-response>late</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        _, pending = editor.start_command("nagent.edit", {"uri": editor.uri(target), "request": "slow"})
        (request,) = await asyncio.to_thread(fake_model.wait_for_requests, 1, 60)
        await wait_until(lambda: bool(editor.client.progress_reports))
        (token,) = list(editor.client.progress_reports)
        editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        outcome = await asyncio.wait_for(pending, 60)
    assert outcome["reason"] == "cancelled"
    sent = "".join(m["content"] for m in request.messages)
    assert outcome["tokens"]["input"] == (len(sent) + 3) // 4 > 0
    assert outcome["tokens"]["turns"] == 1
