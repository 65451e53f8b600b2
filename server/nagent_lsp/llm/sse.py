"""A chat-completion stream read as server-sent events, without a pydantic model per chunk.

Why not the SDK's `AsyncStream[ChatCompletionChunk]`: it builds a typed model for every chunk through
`construct_type`, 250 µs of CPU per chunk on this machine (issue 29: a 10k-line reply streamed a word at a time is 80k
chunks, 20 s of CPU on the server's loop). The response still comes from the SDK — the request, its retries, status
errors and timeouts are the SDK's (`with_streaming_response`) — only the body is read here, line by line, with
`json.loads` per event: about 15 µs per chunk.

What the SDK's stream does and this keeps: events are separated by blank lines; `data:` lines of one event are
joined with newlines; a `[DONE]` event ends the stream; an event whose JSON holds an `error` raises `ErrorEvent`
with its message (llm.openai_chat, the one module that imports openai, raises it as the SDK's `APIError`, which
`_failure` turns into "… reported an error"); an event that is not a JSON object raises ValueError (an unreadable
reply); other fields (`event:`, `id:`, comments) are ignored. A chunk is handed on as `Chunk`, a read-only attribute
view of the JSON, so `_Received.take` reads `chunk.choices[0].delta.content` and `chunk.usage.prompt_tokens` as it
did from the SDK's models.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

DRAIN_WAIT = 2.0  # seconds a body may stay open after `[DONE]` before its connection is given up


class Chunk:
    """Attribute access to a JSON object: a missing key is None, a nested object another Chunk, a list of objects a
    list of Chunks."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return _wrap(self._data.get(name))

    def __repr__(self) -> str:
        return f"Chunk({self._data!r})"


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Chunk(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class ErrorEvent(Exception):
    """An event of the stream whose JSON holds an `error` (llm.openai_chat raises it as the SDK's `APIError`)."""

    def __init__(self, message: str, body: object) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


def chunks(lines: AsyncIterator[str]) -> AsyncIterator[Chunk]:
    """The chunks of a streaming response's lines (`AsyncAPIResponse.iter_lines()`), until `[DONE]` or the end."""
    return _events(lines)


async def drain(lines: AsyncIterator[str], wait: float | None = None) -> None:
    """After `[DONE]`: read the body to its end (a server ends it there), as the SDK's own stream does, so the
    client can reuse the connection for the next request (the runs of a server share one client). A server that
    keeps the body open is left after `wait` seconds, and a connection that fails is left too: the reply was whole,
    only the connection is not reused."""
    given_up: tuple[type[BaseException], ...] = (TimeoutError, *transport_errors(), *timeouts())
    try:
        async with asyncio.timeout(DRAIN_WAIT if wait is None else wait):
            async for _line in lines:
                pass
    except given_up:
        pass


def timeouts() -> tuple[type[BaseException], ...]:
    """What reading the body raises when the per-read timeout passes (the SDK maps these to APITimeoutError)."""
    import httpx2  # the SDK's HTTP client (a dependency of openai >= 3.5)

    return (httpx2.TimeoutException,)


def transport_errors() -> tuple[type[BaseException], ...]:
    """What reading the body raises when the connection drops (the SDK maps these to APIConnectionError)."""
    import ssl

    import anyio
    import httpx2

    return (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[Chunk]:
    data: list[str] = []
    async for line in lines:
        if line:
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            continue
        if not data:
            continue  # a blank line ending an event with no data (a comment, a bare `event:`)
        payload, data = "\n".join(data), []
        if payload.startswith("[DONE]"):
            return
        yield _chunk(payload)
    if data and not data[0].startswith("[DONE]"):  # a last event the server did not end with a blank line
        yield _chunk("\n".join(data))


def _chunk(payload: str) -> Chunk:
    parsed = json.loads(payload)  # not JSON: ValueError, an "unreadable reply" (as from the SDK's stream)
    if not isinstance(parsed, dict):
        raise ValueError("an event of the stream is not a JSON object")
    error = parsed.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise ErrorEvent(message, error)
    return Chunk(parsed)
