"""The openai adapter through the real SDK against the fake server on 127.0.0.1, and the fake itself."""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import math
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import openai
import pytest

from nagent_lsp.config.settings import Settings
from nagent_lsp.core.model import Message, ModelCancelled, ModelError, ModelNotConfigured, Usage
from nagent_lsp.llm import openai_chat, sse
from nagent_lsp.llm.openai_chat import OpenAIChatModel
from tests.harness.fake_openai import FakeOpenAI, drop, garbled, slow, status, text

KEY = "sk-test-SECRET-4f9c2d"
# Only a guard against a hang (a broken cancellation would wait out a 60 s reply): nothing here measures time.
HANG_GUARD = 30.0
RETRYING = "model call failed; retrying"
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


class _Signal(logging.Handler):
    """Set when the adapter logs that the SDK is about to wait before a retry; keeps the delays it logged."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.event = threading.Event()
        self.delays: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(RETRYING):
            self.delays.append(record.args[0])
            self.event.set()

    def wait(self) -> None:
        assert self.event.wait(HANG_GUARD), "no retry was logged"


@pytest.fixture
def retries(caplog):
    caplog.set_level(logging.INFO, logger="nagent_lsp.llm.openai_chat")
    signal = _Signal()
    logger = logging.getLogger("nagent_lsp.llm.openai_chat")
    logger.addHandler(signal)
    yield signal
    logger.removeHandler(signal)


def make_model(
    fake: FakeOpenAI | None, *, environ: dict | None = None, attempts: int = 4, **settings
) -> OpenAIChatModel:
    if fake is not None:
        settings.setdefault("baseUrl", fake.base_url)
    env = {"OPENAI_API_KEY": KEY} if environ is None else environ
    # The SDK's backoff (0.5 s doubling) shrunk a hundredfold: the retry path runs for real, the suite stays fast.
    return OpenAIChatModel(Settings(**settings), env, attempts=attempts, backoff_scale=0.01)


async def started(fake: FakeOpenAI, call) -> asyncio.Task:
    """`call` running as a task, once the fake has received its request."""
    task = asyncio.create_task(call)
    await asyncio.to_thread(fake.wait_for_requests, len(fake.requests) + 1, HANG_GUARD)
    return task


def in_thread(target) -> tuple[threading.Thread, list]:
    """Run `target` in a worker thread; the list receives its result or exception."""
    outcome: list = []

    def run():
        try:
            outcome.append(target())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


def joined(worker: threading.Thread, outcome: list):
    worker.join(HANG_GUARD)
    assert not worker.is_alive(), "the call did not end"
    return outcome[0]


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


async def test_429_then_success_is_retried_honouring_retry_after(fake, retries):
    fake.script(status(429, "slow down", retry_after=0.3), "ok")
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "ok"
    assert [r.headers["x-stainless-retry-count"] for r in fake.chat_requests] == ["0", "1"]
    # The adapter waited what the server asked, not its backoff (which make_model shrinks to milliseconds).
    assert retries.delays == [pytest.approx(0.3)]


async def test_repeated_500s_give_up_with_a_clear_error(fake, retries):
    fake.script(*[status(500, "upstream exploded")] * 5)
    with pytest.raises(ModelError) as info:
        await make_model(fake, attempts=3).complete(MESSAGES)
    message = str(info.value)
    assert "after 3 attempts" in message
    assert "HTTP 500" in message and "upstream exploded" in message
    assert fake.base_url in message
    assert len(fake.chat_requests) == 3
    assert fake.pending == 2
    # The exponential backoff (0.5 s, then 1 s, less up to 25 % jitter), scaled by make_model's 0.01.
    first, second = retries.delays
    assert 0.00375 <= first <= 0.005 and 0.0075 <= second <= 0.01


async def test_dropped_replies_are_retried(fake):
    fake.script(drop(), drop(), "fine")
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "fine"
    assert len(fake.chat_requests) == 3


async def test_unreadable_reply_is_not_retried(fake):
    # A complete 200 the SDK cannot parse: the generation ran already, and such a body repeats (see the module).
    fake.script(garbled(), "unused")
    with pytest.raises(ModelError) as info:
        await make_model(fake).complete(MESSAGES)
    message = str(info.value)
    assert "unreadable reply" in message and fake.base_url in message and "attempts" not in message
    assert len(fake.chat_requests) == 1 and fake.pending == 1


async def test_a_silent_server_is_cut_at_request_timeout_and_never_retried(fake):
    # Retrying would queue a new generation behind the abandoned one on a single-slot local server (issue 23).
    fake.script(slow(60), "unused")
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(make_model(fake, requestTimeout=1.0).complete(MESSAGES), HANG_GUARD)
    message = str(info.value)
    assert fake.base_url in message and "no byte for 1s (nagent.requestTimeout)" in message
    assert "before answering" in message and "attempts" not in message
    assert info.value.retryable is False
    assert len(fake.chat_requests) == 1 and fake.pending == 1


async def test_a_stream_that_stalls_midway_is_cut_and_never_restarted(fake):
    fake.script({"text": "one two three four", "hold_after": 2}, "unused")  # never released: a stalled server
    pieces: list[str] = []
    with pytest.raises(ModelError) as info:
        call = make_model(fake, requestTimeout=1.0).complete(MESSAGES, on_delta=pieces.append)
        await asyncio.wait_for(call, HANG_GUARD)
    message = str(info.value)
    assert fake.base_url in message and "stalled: no byte for 1s" in message
    assert "after 2 tokens of its reply" in message and info.value.retryable is False
    assert pieces == ["one ", "two "]
    assert len(fake.chat_requests) == 1 and fake.pending == 1
    fake.wait_for_disconnects(1, HANG_GUARD)  # the cut closed the connection: the server may stop generating


def test_a_stalled_stream_is_cut_in_a_worker_thread(fake):
    fake.script({"text": "one two", "hold_after": 1}, "unused")
    outcome = joined(*in_thread(lambda: make_model(fake, attempts=1, requestTimeout=1.0).complete_sync(MESSAGES)))
    assert isinstance(outcome, ModelError) and "no byte for 1s (nagent.requestTimeout)" in str(outcome)
    assert outcome.retryable is False  # a generation was under way: the caller must not restart it either
    assert len(fake.chat_requests) == 1 and fake.pending == 1


async def test_a_slow_model_that_keeps_streaming_is_never_cut_by_request_timeout(fake):
    # 8 chunks 0.3 s apart: 2.4 s in all, more than requestTimeout (1 s), never 1 s without a byte.
    words = [f"w{i} " for i in range(8)]
    fake.script({"text": "".join(words), "chunks": words, "chunk_delay": 0.3})
    reply = await asyncio.wait_for(make_model(fake, requestTimeout=1.0).complete(MESSAGES), HANG_GUARD)
    assert reply.text == "".join(words) and len(fake.chat_requests) == 1


async def test_request_deadline_cuts_a_stream_that_never_ends(fake):
    words = [f"w{i} " for i in range(400)]  # 0.1 s apart: 40 s, far past the 1 s deadline
    fake.script({"text": "".join(words), "chunks": words, "chunk_delay": 0.1}, "unused")
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(make_model(fake, requestDeadline=1.0).complete(MESSAGES), HANG_GUARD)
    message = str(info.value)
    assert fake.base_url in message and "nagent.requestDeadline (1s)" in message and "tokens of its reply" in message
    assert info.value.retryable is False and len(fake.chat_requests) == 1 and fake.pending == 1


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, "past"),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_forms(headers, expected):
    seconds = openai_chat._retry_after(headers)
    if expected == "past":
        assert seconds is not None and seconds < 0  # a date gone by: not waited for (the backoff applies)
    else:
        assert seconds == expected


def test_no_private_name_of_the_sdk_is_used():
    """Only the SDK's public surface (issue 22): no subclass of its classes, and no `_name` reached on anything but
    our own `self` — an SDK upgrade must not be able to change our retries or cancellation behind our back."""
    tree = ast.parse(Path(openai_chat.__file__).read_text(encoding="utf-8"))
    subclasses = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any("openai" in ast.unparse(base) or "OpenAI" in ast.unparse(base) for base in node.bases)
    ]
    assert subclasses == []
    private = {
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    }
    assert private <= {"parts._replace"}  # namedtuple's public API


@pytest.mark.parametrize(
    "code, expected",
    [
        (403, "refused access (HTTP 403: nope). Check that the key in OPENAI_API_KEY may use model 'gpt-4.1-mini'"),
        (404, "HTTP 404 from {url}: nope. Check nagent.model ('gpt-4.1-mini') and nagent.baseUrl"),
        (418, "The model server at {url} rejected the request (HTTP 418: nope)."),
    ],
)
async def test_client_error_messages(fake, code, expected):
    fake.script(status(code, "nope"), "unused")
    with pytest.raises(ModelError) as info:
        await make_model(fake).complete(MESSAGES)
    assert expected.format(url=fake.base_url) in str(info.value)
    assert len(fake.chat_requests) == 1


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
        environ = {"MY_LLM_KEY": "sk-from-my-var", "OPENAI_API_KEY": KEY}
        model = make_model(fake, apiKeyEnv="MY_LLM_KEY", environ=environ)
        assert (await model.complete(MESSAGES)).text == "authorised"


async def test_unsupported_temperature_is_dropped_once(fake):
    fake.script(
        status(400, "Unsupported value: 'temperature' does not support 0.2 with this model.", param="temperature"), "ok"
    )
    assert (await make_model(fake).complete(MESSAGES)).text == "ok"
    first, second = fake.chat_requests
    assert "temperature" in first.body and "temperature" not in second.body


async def test_unsupported_max_tokens_switches_to_max_completion_tokens(fake):
    fake.script(
        status(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            param="max_tokens",
        ),
        "ok",
        "again",
    )
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
    fake.script(slow(60))
    cancel = asyncio.Event()
    call = await started(fake, make_model(fake).complete(MESSAGES, cancel=cancel))
    cancel.set()
    with pytest.raises(ModelCancelled):
        await asyncio.wait_for(call, HANG_GUARD)
    assert len(fake.chat_requests) == 1


async def test_cancel_event_set_before_the_call_sends_nothing(fake):
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(ModelCancelled):
        await make_model(fake).complete(MESSAGES, cancel=cancel)
    assert fake.requests == []


async def test_task_cancel_stops_a_slow_reply_and_raises_model_cancelled(fake):
    fake.script(slow(60))
    model = make_model(fake)
    caught: list[BaseException] = []

    async def run():
        try:
            await model.complete(MESSAGES)
        except ModelCancelled as exc:  # what a workflow does to record "Interrupted..."
            caught.append(exc)
            raise

    task = await started(fake, run())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG_GUARD)
    assert task.cancelled() and caught


async def test_cancel_during_backoff(fake, retries):
    fake.script(status(429, retry_after=30), "never")
    cancel = asyncio.Event()
    call = asyncio.create_task(make_model(fake).complete(MESSAGES, cancel=cancel))
    await asyncio.to_thread(retries.wait)  # the SDK is about to wait the 30 s the server asked for
    cancel.set()
    with pytest.raises(ModelCancelled):
        await asyncio.wait_for(call, HANG_GUARD)
    assert len(fake.chat_requests) == 1 and fake.pending == 1


def test_complete_sync_in_a_worker_thread(fake):
    fake.script(text("summary", usage=(5, 1)), status(500, "hiccup"), "after a retry")
    model = make_model(fake)
    reply = joined(*in_thread(lambda: model.complete_sync(MESSAGES)))
    assert reply.text == "summary" and reply.usage == Usage(5, 1)
    # Retried by the sync client too (with a cancel event that stays clear: the cancellable wait).
    assert joined(*in_thread(lambda: model.complete_sync(MESSAGES, cancel=threading.Event()))).text == "after a retry"
    assert len(fake.chat_requests) == 3


def test_complete_sync_cancel_closes_the_request_in_flight(fake):
    fake.script(slow(60), "never")
    cancel = threading.Event()
    worker, outcome = in_thread(lambda: make_model(fake).complete_sync(MESSAGES, cancel=cancel))
    fake.wait_for_requests(1, HANG_GUARD)
    cancel.set()
    assert isinstance(joined(worker, outcome), ModelCancelled)
    assert len(fake.chat_requests) == 1 and fake.pending == 1  # the shut connection was not retried


def test_complete_sync_cancel_during_backoff(fake, retries):
    fake.script(status(429, retry_after=30), "never")
    cancel = threading.Event()
    worker, outcome = in_thread(lambda: make_model(fake).complete_sync(MESSAGES, cancel=cancel))
    retries.wait()
    cancel.set()
    assert isinstance(joined(worker, outcome), ModelCancelled)
    assert len(fake.chat_requests) == 1 and fake.pending == 1


def test_complete_sync_cancel_set_before_the_call_sends_nothing(fake):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelCancelled):
        make_model(fake).complete_sync(MESSAGES, cancel=cancel)
    assert fake.requests == []


# -- the key never leaks -------------------------------------------------------------------------------


async def test_key_never_in_logs_errors_or_repr(fake, caplog):
    for name in ("", "openai", "httpx2", "httpcore2", "nagent_lsp"):
        caplog.set_level(logging.DEBUG, logger=name)
    echo = f"bad request; you sent Authorization: Bearer {KEY} and api_key={KEY}"
    fake.script(status(500, echo), "fine", status(400, echo), status(500, echo), "fine", status(400, echo))
    model = make_model(fake, attempts=2)
    assert (await model.complete(MESSAGES)).text == "fine"  # one logged retry first
    with pytest.raises(ModelError) as info:
        await model.complete(MESSAGES)
    exc = info.value
    assert "HTTP 400" in str(exc)
    # The sync client, with the cancellable path (trace extension, retry wait) in play.
    assert joined(*in_thread(lambda: model.complete_sync(MESSAGES, cancel=threading.Event()))).text == "fine"
    sync_exc = joined(*in_thread(lambda: model.complete_sync(MESSAGES, cancel=threading.Event())))
    assert isinstance(sync_exc, ModelError) and "HTTP 400" in str(sync_exc)
    texts = [str(exc), repr(exc), *map(str, exc.args), "".join(traceback.format_exception(exc)), repr(model)]
    texts += [str(sync_exc), "".join(traceback.format_exception(sync_exc))]
    for record in caplog.records:
        texts.append(record.getMessage())
        if record.exc_info:
            texts.append("".join(traceback.format_exception(*record.exc_info)))
    assert not [t for t in texts if KEY in t]
    # The capture really saw the SDK's and the transport's debug logging and our retry line.
    names = {r.name.split(".")[0] for r in caplog.records}
    assert {"openai", "httpcore2", "nagent_lsp"} <= names
    assert exc.__cause__ is None and exc.__context__ is None
    assert sync_exc.__cause__ is None and sync_exc.__context__ is None


async def test_models_on_one_loop_share_a_client_and_its_connection(fake):
    """Each run makes its own model; building the SDK's client costs 25-55 ms (issue 29's streaming row), so the
    models of one loop and configuration share one, and a whole stream's connection goes back to its pool."""
    fake.script(text("one"), text("two"), text("three"))
    first, second = make_model(fake), make_model(fake)
    assert (await first.complete(MESSAGES)).text == "one"
    await first.aclose()
    assert (await second.complete(MESSAGES)).text == "two"
    other_key = OpenAIChatModel(Settings(model="m", baseUrl=fake.base_url), {"OPENAI_API_KEY": "sk-other"})
    assert (await other_key.complete(MESSAGES)).text == "three"
    peers = [r.peer for r in fake.chat_requests]
    assert peers[0] == peers[1] and peers[2] != peers[0]  # another key: another client, never the same pool


async def test_a_body_left_open_after_done_still_gives_the_whole_reply(fake, monkeypatch):
    """A server that says [DONE] and keeps the body open: the reply is whole; only the connection is given up
    (after DRAIN_WAIT), and the next request works on a new one."""
    monkeypatch.setattr(sse, "DRAIN_WAIT", 0.2)
    fake.script({"text": "all of it", "open_after_done": True}, text("next"))
    model = make_model(fake)
    assert (await model.complete(MESSAGES)).text == "all of it"
    fake.wait_for_disconnects(1, timeout=60)
    assert (await model.complete(MESSAGES)).text == "next"
    peers = [r.peer for r in fake.chat_requests]
    assert peers[0] != peers[1]


def test_prepare_makes_the_client_before_the_first_call(fake):
    """`prepare` (called as a run starts reading its context) makes the client in a worker thread; the first call
    uses it, and the loop's other models too."""
    fake.script(text("ready"))

    async def run() -> tuple[str, bool]:
        model = make_model(fake)
        model.prepare()
        model.prepare()  # once is enough: a second call does nothing
        reply = await model.complete(MESSAGES)
        shared = make_model(fake)._loop_client() is model._loop_client()
        return reply.text, shared

    assert asyncio.run(run()) == ("ready", True)


# -- the fake itself -----------------------------------------------------------------------------------


async def test_fake_streams_to_the_sdk(fake):
    fake.script(text("one two three", usage=(4, 3)), {"text": "abc", "chunks": ["a", "bc"]})
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
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
            model="fake-model", messages=[{"role": "user", "content": "again"}], stream=True
        )
        pieces = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
        assert pieces == ["a", "bc"]
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
    assert [(r.method, r.path) for r in requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
    ]
    assert len(seen) == 2 and all(r.authorization for r in requests)
    assert not any(KEY in json.dumps(r.as_json()) for r in requests)


def test_fake_close_interrupts_a_slow_reply():
    fake = FakeOpenAI()
    fake.script(slow(60))
    client = openai.OpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0, timeout=30)
    errors = []
    worker = threading.Thread(target=lambda: errors.append(_call_expecting_error(client)))
    worker.start()
    fake.wait_for_requests(1, HANG_GUARD)
    fake.close()
    worker.join(HANG_GUARD)  # the reply would take 60 s
    assert not worker.is_alive()
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
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=10)
        texts = [
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
            .choices[0]
            .message.content
            for i in range(2)
        ]
        assert texts == ["scripted", "default"]
    finally:
        proc.terminate()
        assert proc.wait(HANG_GUARD) == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["messages"][0]["content"] for line in lines] == ["q0", "q1"]
    assert all(line["authorization"] is True for line in lines) and KEY not in record.read_text()
