"""The openai adapter through the real SDK against the fake server on 127.0.0.1, and the fake itself."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import openai
import pytest

from nagent_lsp.llm.openai_chat import ChatModel
from nagent_lsp.core.model import Message, ModelCancelled, ModelError, ModelNotConfigured, Usage
from nagent_lsp.config.settings import Settings
from tests.harness.fake_openai import FakeOpenAI, drop, garbled, slow, status, text

KEY = "sk-test-SECRET-4f9c2d"
ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [
    Message("system", "You edit files."),
    Message("user", "Add retries."),
    Message("assistant", "<nagent-read path='a.py'/>"),
    Message("user", "<nagent-read-result>print(1)</nagent-read-result>"),
]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def make_model(fake: FakeOpenAI | None, *, environ: dict | None = None, attempts: int = 4, **settings) -> ChatModel:
    if fake is not None:
        settings.setdefault("baseUrl", fake.base_url)
    env = {"OPENAI_API_KEY": KEY} if environ is None else environ
    # Tiny base delay: the backoff path runs for real but the suite stays fast.
    return ChatModel(Settings(**settings), env, attempts=attempts, base_delay=0.01, max_delay=0.05)


# -- replies, usage, what is sent ----------------------------------------------------------------------


async def test_messages_sent_role_separated_and_provider_usage(fake):
    fake.script(text("done", usage=(120, 7)))
    model = make_model(fake, model="fake-model", temperature=0.3, maxOutputTokens=99)
    reply = await model.complete(MESSAGES, stop=["</nagent-response>"])
    assert reply.text == "done"
    assert reply.usage == Usage(120, 7, estimated=False)
    assert reply.finish_reason == "stop"
    [sent] = fake.chat_requests
    assert sent.messages == [{"role": m.role, "content": m.content} for m in MESSAGES]
    assert sent.body["model"] == "fake-model"
    assert sent.body["temperature"] == 0.3
    assert sent.body["max_tokens"] == 99  # a compatible server gets max_tokens
    assert sent.body["stop"] == ["</nagent-response>"]
    assert sent.authorization and "authorization" not in sent.headers
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_usage_estimated_when_provider_reports_none(fake):
    fake.script(text("x" * 10, usage=None))
    reply = await make_model(fake).complete(MESSAGES)
    chars_in = sum(len(m.content) for m in MESSAGES)
    assert reply.usage == Usage(math.ceil(chars_in / 4), 3, estimated=True)


# -- retries -------------------------------------------------------------------------------------------


async def test_429_then_success_is_retried_honouring_retry_after(fake):
    fake.script(status(429, "slow down", retry_after=0.3), "ok")
    started = time.monotonic()
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "ok"
    assert len(fake.chat_requests) == 2
    # The base delay is 10 ms, so waiting this long means Retry-After was honoured.
    assert time.monotonic() - started >= 0.3


async def test_repeated_500s_give_up_with_a_clear_error(fake):
    fake.script(*[status(500, "upstream exploded")] * 5)
    with pytest.raises(ModelError) as info:
        await make_model(fake, attempts=3).complete(MESSAGES)
    message = str(info.value)
    assert "after 3 attempts" in message
    assert "HTTP 500" in message and "upstream exploded" in message
    assert fake.base_url in message
    assert len(fake.chat_requests) == 3
    assert fake.pending == 2


async def test_garbled_and_dropped_replies_are_retried(fake):
    fake.script(garbled(), drop(), "fine")
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "fine"
    assert len(fake.chat_requests) == 3


async def test_timeout_is_retried(fake):
    fake.script(slow(10, "too late"), "in time")
    model = ChatModel(Settings(baseUrl=fake.base_url, requestTimeout=0.3), {"OPENAI_API_KEY": KEY},
                      base_delay=0.01)
    started = time.monotonic()
    reply = await model.complete(MESSAGES)
    assert reply.text == "in time"
    assert len(fake.chat_requests) == 2
    assert time.monotonic() - started < 3


async def test_connection_refused_gives_up_naming_the_base_url():
    with FakeOpenAI() as gone:
        base = gone.base_url
    model = make_model(None, baseUrl=base, attempts=2)
    with pytest.raises(ModelError) as info:
        await model.complete(MESSAGES)
    assert "after 2 attempts" in str(info.value) and base in str(info.value)


async def test_client_errors_are_not_retried(fake):
    fake.script(status(400, "context too long"), "unused")
    with pytest.raises(ModelError) as info:
        await make_model(fake).complete(MESSAGES)
    assert "HTTP 400" in str(info.value) and "context too long" in str(info.value)
    assert len(fake.chat_requests) == 1


async def test_exhausted_script_fails_fast(fake):
    with pytest.raises(ModelError, match="no scripted reply left"):
        await make_model(fake).complete(MESSAGES)
    assert len(fake.chat_requests) == 1


async def test_wrong_key_is_401_naming_the_variable_and_not_retried():
    with FakeOpenAI(api_key="sk-the-right-one") as fake:
        with pytest.raises(ModelError) as info:
            await make_model(fake).complete(MESSAGES)
        assert len(fake.chat_requests) == 1
    message = str(info.value)
    assert "HTTP 401" in message and "OPENAI_API_KEY" in message and "apiKeyEnv" in message
    assert KEY not in message


async def test_key_comes_from_the_variable_named_by_api_key_env():
    with FakeOpenAI(api_key="sk-from-my-var") as fake:
        fake.script("authorised")
        model = make_model(fake, apiKeyEnv="MY_LLM_KEY", environ={"MY_LLM_KEY": "sk-from-my-var", "OPENAI_API_KEY": KEY})
        assert (await model.complete(MESSAGES)).text == "authorised"


async def test_unsupported_temperature_is_dropped_once(fake):
    fake.script(status(400, "Unsupported value: 'temperature' does not support 0.2 with this model.",
                       param="temperature"), "ok")
    assert (await make_model(fake).complete(MESSAGES)).text == "ok"
    first, second = fake.chat_requests
    assert "temperature" in first.body and "temperature" not in second.body


async def test_unsupported_max_tokens_switches_to_max_completion_tokens(fake):
    fake.script(status(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.", param="max_tokens"), "ok", "again")
    model = make_model(fake, maxOutputTokens=50)
    await model.complete(MESSAGES)
    await model.complete(MESSAGES)  # remembered: no second refusal needed
    first, second, third = fake.chat_requests
    assert first.body["max_tokens"] == 50 and "max_tokens" not in second.body
    assert second.body["max_completion_tokens"] == 50 and third.body["max_completion_tokens"] == 50


# -- configuration -------------------------------------------------------------------------------------


async def test_no_model_configured_names_what_to_set():
    model = make_model(None, environ={})
    assert not model.configured
    with pytest.raises(ModelNotConfigured) as info:
        await model.complete(MESSAGES)
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "nagent.baseUrl" in message and "OPENAI_BASE_URL" in message
    with pytest.raises(ModelNotConfigured):
        model.complete_sync(MESSAGES)


async def test_not_configured_names_a_custom_key_variable():
    with pytest.raises(ModelNotConfigured, match="MY_LLM_KEY"):
        await make_model(None, environ={}, apiKeyEnv="MY_LLM_KEY").complete(MESSAGES)


async def test_base_url_without_key_sends_a_placeholder(fake):
    fake.script("local")
    model = make_model(fake, environ={})
    assert model.configured
    assert (await model.complete(MESSAGES)).text == "local"
    assert fake.chat_requests[0].authorization


async def test_base_url_from_the_environment(fake):
    fake.script("via env")
    model = make_model(None, environ={"OPENAI_BASE_URL": fake.base_url})
    assert model.base_url == fake.base_url
    assert (await model.complete(MESSAGES)).text == "via env"


# -- cancellation --------------------------------------------------------------------------------------


async def test_cancel_event_stops_a_slow_reply(fake):
    fake.script(slow(30))
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, cancel.set)
    started = time.monotonic()
    with pytest.raises(ModelCancelled):
        await make_model(fake).complete(MESSAGES, cancel=cancel)
    assert time.monotonic() - started < 3
    assert len(fake.chat_requests) == 1


async def test_task_cancel_stops_a_slow_reply_and_raises_model_cancelled(fake):
    fake.script(slow(30))
    model = make_model(fake)
    caught: list[BaseException] = []

    async def run():
        try:
            await model.complete(MESSAGES)
        except ModelCancelled as exc:  # what a workflow does to record "Interrupted..."
            caught.append(exc)
            raise

    task = asyncio.create_task(run())
    await asyncio.to_thread(fake.wait_for_requests, 1)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 3
    assert task.cancelled() and caught


async def test_cancel_during_backoff(fake):
    fake.script(status(429, retry_after=30), "never")
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, cancel.set)
    started = time.monotonic()
    with pytest.raises(ModelCancelled):
        await make_model(fake).complete(MESSAGES, cancel=cancel)
    assert time.monotonic() - started < 3
    assert len(fake.chat_requests) == 1


def test_complete_sync_in_a_worker_thread(fake):
    fake.script(text("summary", usage=(5, 1)), slow(30))
    model = make_model(fake)
    results: list = []
    worker = threading.Thread(target=lambda: results.append(model.complete_sync(MESSAGES)))
    worker.start()
    worker.join(10)
    assert results and results[0].text == "summary" and results[0].usage == Usage(5, 1)
    # The second (slow) call is cancelled from another thread.
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(ModelCancelled):
        model.complete_sync(MESSAGES, cancel=cancel)
    assert time.monotonic() - started < 3


# -- the key never leaks -------------------------------------------------------------------------------


async def test_key_never_in_logs_errors_or_repr(fake, caplog):
    for name in ("", "openai", "httpx2", "httpcore2", "nagent_lsp"):
        caplog.set_level(logging.DEBUG, logger=name)
    echo = f"bad request; you sent Authorization: Bearer {KEY} and api_key={KEY}"
    fake.script(status(500, echo), "fine", status(400, echo))
    model = make_model(fake, attempts=2)
    assert (await model.complete(MESSAGES)).text == "fine"  # one logged retry first
    with pytest.raises(ModelError) as info:
        await model.complete(MESSAGES)
    exc = info.value
    assert "HTTP 400" in str(exc)
    texts = [str(exc), repr(exc), *map(str, exc.args), "".join(traceback.format_exception(exc)), repr(model)]
    for record in caplog.records:
        texts.append(record.getMessage())
        if record.exc_info:
            texts.append("".join(traceback.format_exception(*record.exc_info)))
    assert not [t for t in texts if KEY in t]
    # The capture really saw the SDK's and the transport's debug logging and our retry line.
    names = {r.name.split(".")[0] for r in caplog.records}
    assert {"openai", "httpcore2", "nagent_lsp"} <= names
    assert exc.__cause__ is None and exc.__context__ is None


# -- the fake itself -----------------------------------------------------------------------------------


async def test_fake_streams_to_the_sdk(fake):
    fake.script(text("one two three", usage=(4, 3)), {"text": "abc", "chunks": ["a", "bc"]})
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True})
        pieces, usage, finish = [], None, None
        async for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                pieces.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        assert "".join(pieces) == "one two three" and len([p for p in pieces if p]) == 3
        assert finish == "stop" and (usage.prompt_tokens, usage.completion_tokens) == (4, 3)

        stream = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "again"}], stream=True)
        assert [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content] == ["a", "bc"]
    finally:
        await client.close()
    assert [r.stream for r in fake.chat_requests] == [True, True]


async def test_fake_models_responder_and_recording():
    seen = []

    def responder(request):
        seen.append(request)
        return f"echo: {request.messages[-1]['content']}"

    with FakeOpenAI(responder=responder) as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0)
        try:
            assert "fake-model" in [m.id for m in (await client.models.list()).data]
            for word in ("alpha", "beta"):
                reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": word}])
                assert reply.choices[0].message.content == f"echo: {word}"
        finally:
            await client.close()
        requests = fake.requests
    assert [(r.method, r.path) for r in requests] == [("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                                                     ("POST", "/v1/chat/completions")]
    assert len(seen) == 2 and all(r.authorization for r in requests)
    assert not any(KEY in json.dumps(r.as_json()) for r in requests)


def test_fake_close_interrupts_a_slow_reply():
    fake = FakeOpenAI()
    fake.script(slow(60))
    client = openai.OpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0, timeout=30)
    errors = []
    worker = threading.Thread(target=lambda: errors.append(_call_expecting_error(client)))
    worker.start()
    fake.wait_for_requests(1)
    started = time.monotonic()
    fake.close()
    worker.join(5)
    assert not worker.is_alive() and time.monotonic() - started < 3
    assert isinstance(errors[0], openai.APIConnectionError)


def _call_expecting_error(client):
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    except Exception as exc:
        return exc
    return None


def test_fake_runs_as_a_process(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"text": "scripted", "usage": [3, 1]}], "default": {"text": "default"}}))
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.harness.fake_openai", "--script", str(script), "--record", str(record)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=10)
        texts = [client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                 .choices[0].message.content for i in range(2)]
        assert texts == ["scripted", "default"]
    finally:
        proc.terminate()
        assert proc.wait(5) == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["messages"][0]["content"] for line in lines] == ["q0", "q1"]
    assert all(line["authorization"] is True for line in lines) and KEY not in record.read_text()
