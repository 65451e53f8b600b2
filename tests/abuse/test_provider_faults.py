"""Retries (issue 12 item 9): a provider error that cannot pass is not retried, by the adapter or the edit loop,
and a long retry wait is announced so the editor's progress can show it. The campaign (test_campaign.py) checks
the same through the real server: 401/403/404 make one model call, a 429 at most the SDK's four, and a
Retry-After shows in $/progress."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nagent_lsp.agent import loop
from nagent_lsp.config.settings import Settings
from nagent_lsp.core.model import Message, ModelError, Reply, Usage, retry_notice
from nagent_lsp.llm.openai_chat import OpenAIChatModel
from tests.harness.fake_openai import FakeOpenAI, status, text

pytestmark = pytest.mark.abuse
MESSAGES = [Message("system", "rules"), Message("user", "do it")]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def model(fake: FakeOpenAI, attempts: int = 4) -> OpenAIChatModel:
    settings = Settings(baseUrl=fake.base_url)
    return OpenAIChatModel(settings, {"OPENAI_API_KEY": "sk-test"}, attempts=attempts, backoff_scale=0.01)


@pytest.mark.parametrize("code", [400, 401, 403, 404])
async def test_a_refusal_is_not_retryable_and_made_once(fake: FakeOpenAI, code: int) -> None:
    fake.script(*[status(code, "no")] * 3)
    with pytest.raises(ModelError) as info:
        await model(fake).complete(MESSAGES)
    assert info.value.retryable is False
    assert len(fake.chat_requests) == 1


async def test_spent_sdk_retries_are_not_retryable(fake: FakeOpenAI) -> None:
    fake.script(*[status(503, "busy")] * 4)
    with pytest.raises(ModelError) as info:
        await model(fake, attempts=4).complete(MESSAGES)
    assert info.value.retryable is False and len(fake.chat_requests) == 4


async def test_a_transient_failure_is_retryable_when_the_sdk_does_not_retry(fake: FakeOpenAI) -> None:
    fake.script(status(503, "busy"))
    with pytest.raises(ModelError) as info:
        await model(fake, attempts=1).complete(MESSAGES)
    assert info.value.retryable is True and len(fake.chat_requests) == 1


async def test_a_retry_after_wait_is_announced(fake: FakeOpenAI) -> None:
    fake.script(status(429, "wait", retry_after=1), text("ok"))
    heard: list[tuple[float, str]] = []
    token = retry_notice.set(lambda seconds, why: heard.append((seconds, why)))
    try:
        reply = await model(fake).complete(MESSAGES)
    finally:
        retry_notice.reset(token)
    assert reply.text == "ok"
    assert heard == [(pytest.approx(1.0), "the model server asked to wait (Retry-After)")]


async def test_short_backoffs_are_not_announced(fake: FakeOpenAI) -> None:
    fake.script(status(500, "x"), text("ok"))
    heard: list[Any] = []
    token = retry_notice.set(lambda seconds, why: heard.append(seconds))
    try:
        assert (await model(fake).complete(MESSAGES)).text == "ok"
    finally:
        retry_notice.reset(token)
    assert heard == []


# -- the edit loop --------------------------------------------------------------------------------------


class Convo:
    def __init__(self) -> None:
        self.text = "<user-prompt>\ndo it\n</user-prompt>\n"
        self.blocks: list[str] = []

    def append(self, *blocks: str) -> None:
        self.blocks.extend(blocks)
        self.text += "".join(blocks)


class Session:
    """What loop._accepted_reply uses of an EditSession."""

    def __init__(self, errors: list[ModelError], reply: str = "<nagent-response>ok</nagent-response>"):
        self.errors = errors
        self.reply = reply
        self.calls = 0
        self.reports: list[str] = []
        self.tokens = type("T", (), {"add": lambda self, usage: None})()

    async def ask_model(self, messages: list[Message], turn: int = 0) -> Reply:
        self.calls += 1
        notice = retry_notice.get()
        if notice is not None:
            notice(30.0, "the model server asked to wait (Retry-After)")
        if self.errors:
            raise self.errors.pop(0)
        return Reply(self.reply, Usage(1, 1))

    def report(self, message: str) -> None:
        self.reports.append(message)


async def test_the_loop_stops_at_once_on_an_error_that_cannot_pass() -> None:
    session, convo = Session([ModelError("HTTP 401: rejected the API key", retryable=False)]), Convo()
    with pytest.raises(loop.RunFailed) as info:
        await loop._accepted_reply(session, convo, 1, None, loop._Telemetry())  # type: ignore[arg-type]
    assert session.calls == 1
    assert "HTTP 401" in str(info.value) and "nothing was applied" in str(info.value)
    assert any("HTTP 401" in block for block in convo.blocks)


async def test_the_loop_tries_again_when_the_error_may_pass() -> None:
    errors = [ModelError("flaky", retryable=True), ModelError("flaky", retryable=True)]
    session, convo = Session(errors), Convo()
    text_, _parsed, _finish = await loop._accepted_reply(session, convo, 1, None, loop._Telemetry())  # type: ignore[arg-type]
    assert session.calls == 3 and "ok" in text_


async def test_a_retry_wait_shows_in_the_runs_progress() -> None:
    session = Session([])
    await loop._accepted_reply(session, Convo(), 4, None, loop._Telemetry())  # type: ignore[arg-type]
    assert session.reports == [
        "turn 4 · the model server asked to wait (Retry-After): retrying in 30 s (cancel to stop)"
    ]
    assert retry_notice.get() is None  # set only for the call
