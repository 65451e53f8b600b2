"""A fake OpenAI chat-completions server on 127.0.0.1 that the real openai SDK talks to unmodified.

It replays scripted replies, injects faults, and records every request so tests can assert what the
model was sent. Standard library only, so editor-client tests can run it as a separate process.

In a test::

    with FakeOpenAI() as fake:
        fake.script("first reply", {"status": 429, "retry_after": 0.1}, text("second", usage=(12, 3)))
        client = openai.OpenAI(base_url=fake.base_url, api_key="sk-test")
        ...
        assert fake.requests[0].messages == [{"role": "user", "content": "hi"}]

As a process (the base URL, ending in /v1, is the first line on stdout; SIGTERM/SIGINT stops it)::

    python -m tests.harness.fake_openai --port 0 --script replies.json --record requests.jsonl

Endpoints: ``POST /v1/chat/completions`` (``"stream": true`` answers with SSE ``chat.completion.chunk``
events ending in ``data: [DONE]``; a usage chunk is added when ``stream_options.include_usage`` is true),
``GET /v1/models``. Anything else is a 404 in OpenAI's error shape.

Script entries (JSON objects; in Python a bare string is shorthand for ``{"text": ...}``). Each chat
request takes the next entry; when the queue is empty the ``responder`` callable (Python only), else the
``default`` entry answers; with neither, the request gets a 400 "no scripted reply left" (a 4xx, so
clients fail fast instead of retrying).

- ``{"text": "hello"}`` — a reply. Optional: ``"usage": {"prompt_tokens": 12, "completion_tokens": 3}``
  (add ``"cached_tokens": 8`` to report ``prompt_tokens_details.cached_tokens``)
  (or ``[12, 3]``; ``null`` sends no usage at all; absent means a usage computed as ceil(chars/4)),
  ``"finish_reason": "stop"``, ``"chunks": ["hel", "lo"]`` (how a stream splits the text; default: by word),
  ``"chunk_delay": 0.1`` (seconds between stream chunks), ``"delay": 2.5`` (seconds before answering).
- ``{"status": 429, "retry_after": 1, "message": "slow down"}`` — an error status in OpenAI's error body
  (any status; ``retry_after`` adds a ``Retry-After`` header, ``param`` adds ``error.param``).
- ``{"delay": 30, "text": "late"}`` — slow: waits before answering. Every wait is interrupted at once by
  ``close()`` (and ``reset()``), so a test that cancels a slow call still ends quickly.
- ``{"drip": 0.5, "drip_bytes": 8, "text": "…"}`` — a dribbling provider: the headers at once (the full
  Content-Length), then the body ``drip_bytes`` bytes (default 8) every ``drip`` seconds, so no single read waits
  long while the whole reply takes ages (what a per-read timeout never catches). Interrupted like a delay.
- ``{"hold_after": 2, "text": "…"}`` — a stream that sends its first 2 content chunks, then holds until the test
  calls ``release()`` (or ``reset()``/``close()``), watching the socket meanwhile: a client that closes the
  connection is counted in ``disconnects`` (``wait_for_disconnects``). Chunk pacing by events, not sleeps;
  ``wait_for_chunks(n)`` blocks until n content chunks were sent in all. ``"hold_after": 0`` holds before the
  first content chunk (the role chunk is sent), a held stream never released is a stalled server.
- ``{"open_after_done": true, "text": "…"}`` — a stream that sends ``[DONE]`` but keeps its body open until
  ``release()`` (the client's end of the connection is watched and counted as for ``hold_after``).
- ``{"stream_error": "overloaded", "text": "…"}`` — a stream whose content is followed by an error event
  (``data: {"error": {...}}``) instead of its end.
- ``{"fault": "garbled"}`` — a 200 whose JSON body is cut off (in a stream: an event that is not JSON).
- ``{"fault": "drop"}`` — the connection is closed without any response.

A script file is either a JSON list of entries, or an object ``{"replies": [...], "default": {...}}``.

``refuse_stream`` (an attribute): ``"stream"`` answers every streaming request with a 400
"streaming is not supported" (as some compatible servers do), ``"stream_options"`` refuses requests that carry
``stream_options`` (param ``stream_options``); the entry is not consumed, so the client's plain retry gets it.

One server can serve many tests in turn: ``reset()`` forgets the script, the responder, the default and the
recorded requests, and drops every reply still waiting out a delay (the connection is closed).

Recorded requests (``FakeOpenAI.requests``; with ``--record FILE`` one JSON object per line): ``method``,
``path``, ``headers`` (lower-cased names, the ``authorization`` header left out), ``authorization`` (true
when the request carried one; its value is never kept), ``body`` (parsed JSON or null) and, for chat
requests, ``messages`` and ``stream``.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Entry = str | Mapping[str, Any]
Responder = Callable[["RecordedRequest"], Entry]


def text(content: str, *, usage: tuple[int, int] | Mapping[str, int] | None | str = "auto", **extra: Any) -> dict:
    """A text reply entry; ``usage=None`` sends none, ``usage=(prompt, completion)`` sends those figures."""
    entry: dict[str, Any] = {"text": content, **extra}
    if usage != "auto":
        entry["usage"] = list(usage) if isinstance(usage, tuple) else usage
    return entry


def status(code: int, message: str | None = None, *, retry_after: float | None = None, **extra: Any) -> dict:
    entry: dict[str, Any] = {"status": code, **extra}
    if message is not None:
        entry["message"] = message
    if retry_after is not None:
        entry["retry_after"] = retry_after
    return entry


def slow(seconds: float, content: str = "late reply") -> dict:
    return {"delay": seconds, "text": content}


def drip(every: float, content: str = "dripped reply", *, size: int = 8) -> dict:
    return {"drip": every, "drip_bytes": size, "text": content}


def garbled() -> dict:
    return {"fault": "garbled"}


def drop() -> dict:
    return {"fault": "drop"}


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    authorization: bool
    body: Any = None
    time: float = field(default_factory=time.time)
    peer: str = ""  # the client's address and port: one per connection (keep-alive reuses it)

    @property
    def messages(self) -> list[dict]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    def as_json(self) -> dict:
        out = asdict(self)
        if self.path.endswith("/chat/completions"):
            out["messages"] = self.messages
            out["stream"] = self.stream
        return out


def _ceil4(chars: int) -> int:
    return math.ceil(chars / 4)


def _normalise(entry: Entry) -> dict:
    if isinstance(entry, str):
        return {"text": entry}
    if not isinstance(entry, Mapping):
        raise TypeError(f"a script entry is a string or a mapping, got {type(entry).__name__}")
    return dict(entry)


class FakeOpenAI:
    """The server, running in a background thread from construction until ``close()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default: Entry | None = None,
        responder: Responder | None = None,
        api_key: str | None = None,
        models: Iterable[str] = ("gpt-4.1-mini", "fake-model"),
        record_file: str | None = None,
    ):
        """``api_key``: when given, requests with another bearer token get a 401 like the real API."""
        self.refuse_stream: str | None = None  # see the module's docstring
        self.disconnects = 0  # held streams whose client closed the connection
        self._chunks_sent = 0  # content chunks sent by every stream so far
        self._release = threading.Event()  # set by release(): held streams go on
        self.default = default
        self.responder = responder
        self.models = list(models)
        self._api_key = api_key
        self._queue: collections.deque[dict] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._generation = threading.Event()  # set (and replaced) by reset() and close(): cuts pending delays
        self._record_file = record_file
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        # A test that fails mid-request must not print a traceback per dropped socket.
        self._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        bound_host, bound_port = self._httpd.server_address[:2]
        self.base_url = f"http://{bound_host}:{bound_port}/v1"

    # -- scripting ---------------------------------------------------------------------------------

    def script(self, *replies: Entry) -> FakeOpenAI:
        with self._lock:
            self._queue.extend(_normalise(r) for r in replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted entries not yet consumed."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def release(self) -> None:
        """Let every stream held by ``hold_after`` go on (and any that holds later, until ``reset()``)."""
        self._release.set()

    def wait_for_chunks(self, count: int, timeout: float = 5.0) -> None:
        """Block until at least ``count`` content chunks were sent by the streams so far (or raise TimeoutError)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self._chunks_sent >= count, timeout):
                raise TimeoutError(f"fake_openai: {self._chunks_sent} chunks sent, expected {count}")

    def wait_for_disconnects(self, count: int, timeout: float = 5.0) -> None:
        """Block until at least ``count`` held streams saw their client close the connection."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self.disconnects >= count, timeout):
                raise TimeoutError(f"fake_openai: {self.disconnects} disconnects seen, expected {count}")

    def _counted(self, chunks: int = 0, disconnects: int = 0) -> None:
        with self._arrived:
            self._chunks_sent += chunks
            self.disconnects += disconnects
            self._arrived.notify_all()

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests arrived (or raise TimeoutError)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(f"fake_openai: {len(self._requests)} requests arrived, expected {count}")
            return list(self._requests)

    # -- lifecycle ---------------------------------------------------------------------------------

    def reset(self) -> FakeOpenAI:
        """Start over for the next test: no script, responder, default or recorded request; delayed replies
        of earlier requests are dropped instead of answered."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self.responder = None
            self.default = None
            self.refuse_stream = None
            self.disconnects = self._chunks_sent = 0
            finished, self._generation = self._generation, threading.Event()
            released, self._release = self._release, threading.Event()
        finished.set()
        released.set()
        return self

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()  # wakes every delayed handler
        self._generation.set()
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the handler -----------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._arrived:
            self._requests.append(request)
            number = len(self._requests)
            self._arrived.notify_all()
        if self._record_file:
            with open(self._record_file, "a", encoding="utf-8") as out:
                out.write(json.dumps(request.as_json()) + "\n")
        return number

    def _next_entry(self, request: RecordedRequest, number: int) -> dict:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return _normalise(self.responder(request))
        if self.default is not None:
            return _normalise(self.default)
        return {
            "status": 400,
            "message": f"fake_openai: no scripted reply left for request #{number}",
            "type": "fake_openai_script_exhausted",
        }

    def _sleep(self, seconds: float, generation: threading.Event | None = None) -> bool:
        """Wait; False when the server is closing or was reset since the request came (the handler gives up)."""
        return not (generation or self._closing).wait(max(0.0, float(seconds)))


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_fake = fake

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real server; the SDK reuses connections
    server_fake: FakeOpenAI
    _generation: threading.Event | None = None

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests instead
        pass

    # -- plumbing ----------------------------------------------------------------------------------

    def _capture(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return RecordedRequest(
            self.command,
            self.path,
            headers,
            "authorization" in {k.lower() for k in self.headers},
            body,
            peer=f"{self.client_address[0]}:{self.client_address[1]}",
        )

    def _send_json(self, code: int, payload: Any, extra_headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._send_raw(code, data, "application/json", extra_headers)

    def _send_raw(
        self, code: int, data: bytes, content_type: str, extra_headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(
        self,
        code: int,
        message: str,
        *,
        type_: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        error = {
            "message": message,
            "type": type_ or ("rate_limit_error" if code == 429 else "fake_error"),
            "param": param,
            "code": None,
        }
        self._send_json(code, {"error": error}, headers)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- endpoints ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        request = self._capture()
        self.server_fake._record(request)
        if self.path.rstrip("/") == "/v1/models":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake_openai"} for m in self.server_fake.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._error(404, f"fake_openai: no route GET {self.path}", type_="invalid_request_error")

    def do_POST(self) -> None:
        self._generation = self.server_fake._generation  # the test this request belongs to (see reset())
        request = self._capture()
        number = self.server_fake._record(request)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"fake_openai: no route POST {self.path}", type_="invalid_request_error")
            return
        expected = self.server_fake._api_key
        if expected is not None and self.headers.get("authorization") != f"Bearer {expected}":
            self._error(401, "Incorrect API key provided.", type_="invalid_request_error")
            return
        refused = self.server_fake.refuse_stream
        if request.stream and refused is not None:
            body = request.body if isinstance(request.body, dict) else {}
            if refused == "stream":
                self._error(400, "streaming is not supported by this server", type_="invalid_request_error")
                return
            if refused == "stream_options" and "stream_options" in body:
                self._error(
                    400,
                    "Unrecognized request argument: stream_options",
                    type_="invalid_request_error",
                    param="stream_options",
                )
                return
        entry = self.server_fake._next_entry(request, number)
        try:
            self._answer(request, number, entry)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (cancelled); nothing to answer

    def _answer(self, request: RecordedRequest, number: int, entry: dict) -> None:
        if entry.get("delay") and not self.server_fake._sleep(entry["delay"], self._generation):
            self._drop()
            return
        fault = entry.get("fault")
        if fault == "drop":
            self._drop()
            return
        if "status" in entry and entry["status"] != 200:
            headers = {}
            if entry.get("retry_after") is not None:
                headers["Retry-After"] = str(entry["retry_after"])
            self._error(
                int(entry["status"]),
                entry.get("message") or f"fake_openai: scripted HTTP {entry['status']}",
                type_=entry.get("type"),
                param=entry.get("param"),
                headers=headers,
            )
            return
        body = request.body if isinstance(request.body, dict) else {}
        model = body.get("model") or "fake-model"
        reply_id = f"chatcmpl-fake-{number}"
        content = str(entry.get("text", ""))
        usage = self._usage(entry, request, content)
        if request.stream:
            self._stream(entry, reply_id, model, content, usage, body)
            return
        if fault == "garbled":
            self._send_raw(
                200,
                b'{"id": "' + reply_id.encode() + b'", "object": "chat.completion", "choices": [{"ind',
                "application/json",
            )
            return
        payload: dict[str, Any] = {
            "id": reply_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": entry.get("finish_reason", "stop"),
                    "logprobs": None,
                }
            ],
        }
        if usage is not None:
            payload["usage"] = usage
        if entry.get("drip"):
            self._drip(json.dumps(payload).encode(), float(entry["drip"]), int(entry.get("drip_bytes") or 8))
            return
        self._send_json(200, payload)

    def _drip(self, data: bytes, every: float, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for start in range(0, len(data), size):
            if not self.server_fake._sleep(every, self._generation):
                self._drop()
                return
            self.wfile.write(data[start : start + size])
            self.wfile.flush()

    @staticmethod
    def _usage(entry: dict, request: RecordedRequest, content: str) -> dict | None:
        if "usage" not in entry:
            prompt = _ceil4(sum(len(str(m.get("content") or "")) for m in request.messages))
            completion = _ceil4(len(content))
        elif entry["usage"] is None:
            return None
        elif isinstance(entry["usage"], Mapping):
            prompt = int(entry["usage"].get("prompt_tokens", 0))
            completion = int(entry["usage"].get("completion_tokens", 0))
            cached = entry["usage"].get("cached_tokens")
            if cached is not None:  # OpenAI's prompt-cache figure, in prompt_tokens_details
                return {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": int(cached)},
                }
        else:
            prompt, completion = (int(x) for x in entry["usage"])
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _hold(self) -> bool:
        """Wait for ``release()``; False (the stream is over) when the client closed the connection meanwhile, or
        the server is reset or closing."""
        fake = self.server_fake
        release, generation = fake._release, self._generation or fake._closing
        while not release.wait(0.02):
            if generation.is_set() or fake._closing.is_set():
                self._drop()
                return False
            if _peer_closed(self.connection):
                fake._counted(disconnects=1)
                return False
        return True

    def _stream(self, entry: dict, reply_id: str, model: str, content: str, usage: dict | None, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        created = int(time.time())

        def event(data: str) -> None:
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def chunk(delta: dict, finish: str | None, **extra: Any) -> str:
            return json.dumps(
                {
                    "id": reply_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
                    **extra,
                }
            )

        if entry.get("fault") == "garbled":
            event('{"id": "' + reply_id + '", "choices": [')
        else:
            pieces = entry.get("chunks")
            if pieces is None:
                words = content.split(" ")
                pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if content else []
            event(chunk({"role": "assistant", "content": ""}, None))
            hold = entry.get("hold_after")
            for i, piece in enumerate(pieces):
                delay = entry.get("chunk_delay")
                if delay and not self.server_fake._sleep(delay, self._generation):
                    self._drop()
                    return
                if hold is not None and i == int(hold) and not self._hold():
                    return
                event(chunk({"content": piece}, None))
                self.server_fake._counted(chunks=1)
            if hold is not None and int(hold) >= len(pieces) and not self._hold():
                return
            if entry.get("stream_error"):
                event(json.dumps({"error": {"message": str(entry["stream_error"]), "type": "server_error"}}))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            event(chunk({}, entry.get("finish_reason", "stop")))
            if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
                event(
                    json.dumps(
                        {
                            "id": reply_id,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            event("[DONE]")
            if entry.get("open_after_done") and not self._hold():
                return  # the client gave the connection up while the body was still open
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _peer_closed(connection: socket.socket) -> bool:
    """Whether the client has closed its end (a readable socket with nothing to read)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def load_script(path: str) -> tuple[list[Entry], Entry | None]:
    """Read a script file: a list of entries, or {"replies": [...], "default": {...}}."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict):
        return list(data.get("replies", [])), data.get("default")
    raise ValueError(f"{path}: a script is a JSON list of entries or an object with 'replies'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_openai", description="Fake OpenAI chat-completions server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--script", help="JSON script file (see the module docstring)")
    parser.add_argument("--default-text", help="reply with this text once the script is used up")
    parser.add_argument("--api-key", help="answer 401 unless the request carries this bearer token")
    parser.add_argument("--record", help="append every request to this file as a JSON line")
    args = parser.parse_args(argv)

    replies, default = load_script(args.script) if args.script else ([], None)
    if args.default_text is not None:
        default = {"text": args.default_text}
    fake = FakeOpenAI(args.host, args.port, default=default, api_key=args.api_key, record_file=args.record)
    fake.script(*replies)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(fake.base_url, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        fake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
