"""llm.sse: the chat-completion stream's body read as server-sent events (the cases the fake server never sends)."""

from __future__ import annotations

import asyncio

import pytest

from nagent_lsp.llm import sse


class Lines:
    """An SDK streaming response's face that llm.sse uses: `iter_lines()` and `http_request`."""

    http_request = None

    def __init__(self, *lines: str) -> None:
        self.lines = lines

    async def iter_lines(self):
        for line in self.lines:
            yield line


def read(*lines: str) -> list[sse.Chunk]:
    async def run() -> list[sse.Chunk]:
        return [chunk async for chunk in sse.chunks(Lines(*lines).iter_lines())]

    return asyncio.run(run())


def test_events_comments_and_done() -> None:
    got = read(
        ": a comment line",
        "",
        "event: message",
        'data: {"choices": [{"index": 0, "delta": {"content": "he"}}]}',
        "",
        'data:{"choices": [{"index": 0, "delta": {"content": "llo"}, "finish_reason": "stop"}]}',
        "",
        'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}',
        "",
        "data: [DONE]",
        "",
        'data: {"choices": [{"delta": {"content": "after the end"}}]}',
        "",
    )
    assert [c.choices[0].delta.content for c in got[:2]] == ["he", "llo"]
    assert got[1].choices[0].finish_reason == "stop" and got[0].choices[0].finish_reason is None
    assert got[2].usage.prompt_tokens == 3 and got[2].usage.prompt_tokens_details is None
    assert len(got) == 3  # nothing after [DONE]


def test_data_lines_of_one_event_are_joined_and_a_last_event_needs_no_blank_line() -> None:
    got = read('data: {"choices":', 'data: [{"delta": {"content": "x"}}]}', "", 'data: {"id": "last"}')
    assert got[0].choices[0].delta.content == "x" and got[1].id == "last"


def test_an_error_event_raises_with_its_message_and_body() -> None:
    with pytest.raises(sse.ErrorEvent, match="overloaded") as info:
        read('data: {"choices": [{"delta": {"content": "a"}}]}', "", 'data: {"error": {"message": "overloaded"}}', "")
    assert info.value.body == {"message": "overloaded"}
    with pytest.raises(sse.ErrorEvent, match="An error occurred during streaming"):
        read('data: {"error": "boom"}', "")


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", '"text"'])
def test_an_event_that_is_not_a_json_object_is_an_unreadable_reply(payload: str) -> None:
    with pytest.raises(ValueError):
        read(f"data: {payload}", "")
