"""Streaming model calls (issue 23): the adapter through the real SDK against the fake server's SSE streams, and the
answer extractor that turns a reply still being written into the text of its `<nagent-response>`."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

from nagent_lsp.config.settings import Settings
from nagent_lsp.core.model import Message, ModelCancelled, ModelError, Usage
from nagent_lsp.llm import openai_chat
from nagent_lsp.llm.openai_chat import OpenAIChatModel
from nagent_lsp.tags import Read, Shell, Write
from nagent_lsp.tags.stream import AnswerStream, action_step, step_label
from tests.harness.fake_openai import FakeOpenAI, status, text

HANG_GUARD = 30.0  # only a guard against a hang: nothing here measures time
MESSAGES = [Message("system", "You edit files."), Message("user", "Add retries.")]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def _forget_adaptations():
    """The once-per-endpoint memory is the process's: each test starts without it."""
    yield
    openai_chat._PLAIN_ENDPOINTS.clear()
    openai_chat._NO_USAGE_ENDPOINTS.clear()


def make_model(fake: FakeOpenAI, **settings) -> OpenAIChatModel:
    settings.setdefault("baseUrl", fake.base_url)
    return OpenAIChatModel(Settings(**settings), {"OPENAI_API_KEY": "sk-test"}, backoff_scale=0.01)


class Deltas:
    """Collects on_delta pieces; a test waits for a count of them on an event, never on a clock."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, piece: str) -> None:
        with self._changed:
            self.pieces.append(piece)
            self._changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.pieces) >= count, HANG_GUARD), self.pieces


# -- the adapter ------------------------------------------------------------------------------------------


async def test_every_call_streams_with_usage_requested_and_the_servers_figures_kept(fake):
    fake.script(text("alpha beta gamma", usage=(12, 3)))
    deltas = Deltas()
    reply = await make_model(fake).complete(MESSAGES, on_delta=deltas)
    assert reply.text == "alpha beta gamma" and reply.finish_reason == "stop"
    assert reply.usage == Usage(12, 3)  # from the stream's usage chunk, not the estimate
    assert deltas.pieces == ["alpha ", "beta ", "gamma"]
    (request,) = fake.chat_requests
    assert request.stream and request.body["stream_options"] == {"include_usage": True}


async def test_deltas_reach_the_caller_before_the_reply_ends(fake):
    fake.script({"text": "one two three four", "hold_after": 2})
    deltas = Deltas()
    call = asyncio.create_task(make_model(fake).complete(MESSAGES, on_delta=deltas))
    await asyncio.to_thread(deltas.wait_for, 2)
    assert deltas.pieces == ["one ", "two "] and not call.done()  # the server still holds the rest
    fake.release()
    reply = await asyncio.wait_for(call, HANG_GUARD)
    assert reply.text == "one two three four" and "".join(deltas.pieces) == reply.text


async def test_a_length_stop_is_reported_from_the_stream(fake):
    fake.script(text("cut sho", finish_reason="length"))
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "cut sho" and reply.finish_reason == "length"


async def test_an_endpoint_that_refuses_streaming_gets_plain_calls_once_and_for_all(fake):
    fake.refuse_stream = "stream"
    fake.script(text("first", usage=(4, 1)), text("second", usage=(5, 1)))
    deltas = Deltas()
    model = make_model(fake)
    assert (await model.complete(MESSAGES, on_delta=deltas)).text == "first"
    assert deltas.pieces == ["first"]  # a plain reply is one delta
    again = await make_model(fake).complete(MESSAGES)  # a new model of the same endpoint remembers
    assert again.text == "second" and again.usage == Usage(5, 1)
    assert [r.stream for r in fake.chat_requests] == [True, False, False]


async def test_an_endpoint_that_refuses_stream_options_streams_without_them(fake):
    fake.refuse_stream = "stream_options"
    fake.script("streamed anyway", "and again")
    reply = await make_model(fake).complete(MESSAGES)
    assert reply.text == "streamed anyway" and reply.usage.estimated  # no usage chunk without the option
    assert (await make_model(fake).complete(MESSAGES)).text == "and again"
    sent = [("stream_options" in r.body, r.stream) for r in fake.chat_requests]
    assert sent == [(True, True), (False, True), (False, True)]


async def test_a_refusal_before_any_answer_is_retried(fake):
    fake.script(status(429, retry_after=0), status(503), "third time")
    deltas = Deltas()
    reply = await make_model(fake).complete(MESSAGES, on_delta=deltas)
    assert reply.text == "third time" and deltas.pieces == ["third ", "time"]
    assert len(fake.chat_requests) == 3


async def test_an_error_inside_the_stream_names_the_endpoint_and_is_not_retried(fake):
    fake.script({"text": "half an", "stream_error": "the model crashed"}, "unused")
    with pytest.raises(ModelError) as info:
        await make_model(fake).complete(MESSAGES)
    message = str(info.value)
    assert fake.base_url in message and "the model crashed" in message and "tokens of its reply" in message
    assert info.value.retryable is False and len(fake.chat_requests) == 1 and fake.pending == 1


async def test_cancel_mid_stream_closes_the_connection(fake):
    fake.script({"text": "one two three", "hold_after": 1}, "next")
    cancel, deltas = asyncio.Event(), Deltas()
    model = make_model(fake)
    call = asyncio.create_task(model.complete(MESSAGES, cancel=cancel, on_delta=deltas))
    await asyncio.to_thread(deltas.wait_for, 1)
    cancel.set()
    with pytest.raises(ModelCancelled):
        await asyncio.wait_for(call, HANG_GUARD)
    # The held stream saw its client go: a real server stops that generation (tests/test_llama_real.py).
    await asyncio.to_thread(fake.wait_for_disconnects, 1, HANG_GUARD)
    assert (await model.complete(MESSAGES)).text == "next"  # the same client goes on with a new connection
    assert len(fake.chat_requests) == 2


def test_complete_sync_streams_and_its_cancel_closes_the_connection(fake):
    fake.script("a b c", {"text": "one two", "hold_after": 1})
    model = make_model(fake)
    deltas = Deltas()
    assert model.complete_sync(MESSAGES, on_delta=deltas).text == "a b c" and deltas.pieces == ["a ", "b ", "c"]
    cancel, outcome, second = threading.Event(), [], Deltas()

    def run() -> None:
        try:
            outcome.append(model.complete_sync(MESSAGES, cancel=cancel, on_delta=second))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    second.wait_for(1)
    cancel.set()
    worker.join(HANG_GUARD)
    assert isinstance(outcome[0], ModelCancelled)
    fake.wait_for_disconnects(1, HANG_GUARD)


# -- the answer as it forms --------------------------------------------------------------------------------

REPLY = (
    'Let me look. <nagent-read path="diff.c"/> a < b and <b>bold</b> '
    "<nagent-response>Hello <b>world</b>, 2 < 3 and </nagent-respons is not a close</nagent-response>"
    '<nagent-write path="calc.py">\n<nagent-response>file content, not an answer</nagent-response>\n</nagent-write>'
    "<nagent-shell>/usr/bin/pytest -q tests</nagent-shell>"
    "<nagent-response>second part</nagent-response> trailing prose"
)
ANSWER = "Hello <b>world</b>, 2 < 3 and </nagent-respons is not a close\n\nsecond part"


@pytest.mark.parametrize("seed", range(40))
def test_the_answer_is_extracted_whole_however_the_reply_is_split(seed):
    rng = random.Random(seed)
    answer, shown, steps, at = AnswerStream(), [], [], 0
    while at < len(REPLY):
        size = rng.randint(1, 9)
        shown.append(answer.feed(REPLY[at : at + size]))
        steps.append(answer.step)
        at += size
    assert "".join(shown) == ANSWER
    seen = [s for i, s in enumerate(steps) if s and (i == 0 or steps[i - 1] != s)]
    assert seen == [
        "reading diff.c",
        "answering",
        "writing calc.py",
        "running a command",
        "running pytest",
        "answering",
    ]


def test_answer_text_is_given_as_soon_as_it_is_certain():
    answer = AnswerStream()
    assert answer.feed("<nagent-resp") == ""  # maybe our tag: wait
    assert answer.feed("onse>Hi the") == "Hi the"
    assert answer.feed("re</nag") == "re"  # "</nag" may be the close tag: held back
    assert answer.feed("gy") == "</naggy"  # it was not
    assert answer.feed("</nagent-response>") == ""
    assert answer.feed("<nagent-next>later</nagent-next>") == "" and answer.step == "planning the next turn"


def test_step_labels():
    assert action_step(Read("src/diff.c")) == "reading src/diff.c"
    assert action_step(Write("calc.py", "x = 1\n")) == "writing calc.py"
    assert action_step(Shell("  pytest -q")) == "running pytest"
    assert step_label("nagent-shell", command="") == "running a command"


def test_a_long_reply_keeps_only_its_undecided_tail():
    """A 10,000-line write in 50,000 pieces: the scanner keeps a bounded tail (appending to and searching the
    whole reply per piece was quadratic: 15 s of CPU for one reply), and still gives the answer after it whole."""
    answer = AnswerStream()
    body = "".join(f"line {i} of the file\n" for i in range(10_000))
    reply = f'<nagent-write path="calc.py">\n{body}</nagent-write>\n<nagent-response>all done</nagent-response>'
    pieces = [reply[i : i + 5] for i in range(0, len(reply), 5)]
    shown, largest = [], 0
    for piece in pieces:
        shown.append(answer.feed(piece))
        largest = max(largest, len(answer._buf))
    assert "".join(shown) == "all done" and answer.chars == len(reply)
    assert largest < 64, largest
    assert answer.step == "answering"
