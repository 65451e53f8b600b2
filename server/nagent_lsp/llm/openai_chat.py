"""Chat completions through the openai SDK: the only module that imports `openai` (DESIGN §3).

Works against OpenAI and any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through the base URL, using the
SDK's public surface only (its clients, `chat.completions.create`, its exception classes): no private name of the SDK
is overridden or called, so an SDK upgrade cannot change our retry or cancel behaviour behind our back.

Every call streams (`stream=True`, issue 23): each piece of text goes to `on_delta` as it arrives, and the usage comes
from `stream_options.include_usage` (else the estimate). An endpoint that refuses streaming gets plain calls from then
on (one refused request per endpoint and process), one that refuses `stream_options` gets streams without it.

Two bounds per call, both ours: `nagent.requestTimeout` is the silence allowed (no byte for that long: the SDK's
per-read timeout), so a slow model that keeps streaming is never cut and a stalled one is; `nagent.requestDeadline`
bounds each request end to end. The error names the endpoint, which bound was hit and after how long.

One call path (`_complete`), for the async and the blocking form alike (`complete_sync` runs it on an event loop of
its own). Retries are ours, with the SDK's own switched off (`max_retries=0`), and only of requests whose reply never
began: 408, 409, 429, 5xx and refused or dropped connections before any answer are tried again up to `attempts`
requests in all, backing off 0.5 s doubling to 8 s less up to 25 % jitter, or as Retry-After / retry-after-ms say
(up to 2 min; longer is not waited for); a server's `x-should-retry` is obeyed. A timeout, a deadline, or a stream
that broke once it had begun is never retried: the server may still be generating (a single-slot local server would
queue the retry behind the abandoned generation), and a generation under way is never silently restarted. A 200
whose body does not parse is not retried either: the (billed) generation ran. Cancelling (the event, or the task)
closes the connection, which a llama.cpp/Ollama server takes as the end of that generation.

Ours too: readable messages per failure, one adaptation when a model refuses `temperature` or the max-tokens
parameter, and the key never in an error or log. Every ModelError says whether calling again could help
(`retryable`, core.model): never for a refusal that repeats (400/401/403/404) nor once our retries are spent, so
callers do not multiply them; a retry wait of a second or more is announced through core.model.retry_notice, so a
long Retry-After shows in the editor's progress.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from nagent_lsp.config.settings import Settings
from nagent_lsp.core.model import (
    Message,
    ModelCancelled,
    ModelError,
    ModelNotConfigured,
    Reply,
    Usage,
    estimate_tokens,
    retry_notice,
)
from nagent_lsp.core.secret_env import process_environ
from nagent_lsp.llm import sse

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers ignore the key, but the SDK (and some proxies) insist on an Authorization header.
PLACEHOLDER_KEY = "nagent-no-key"
DEFAULT_ATTEMPTS = 4  # requests per call, retries included
NOTICE_WAIT = 1.0  # seconds: a retry wait at least this long is shown to the user (core.model.retry_notice)
_TRANSIENT = (408, 409, 429)  # statuses worth another attempt, with 5xx
INITIAL_RETRY_DELAY = 0.5  # seconds, doubling per retry up to MAX_RETRY_DELAY, less up to 25 % jitter
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 120.0  # a server's Retry-After is honoured up to this; a longer one ends the call
RETRY_COUNT_HEADER = "x-stainless-retry-count"  # the SDK's numbering of a call's requests, kept for providers
_STATUS_MESSAGES = {  # by HTTP status (500: any 5xx; 0: any other)
    401: "The model server at {where} rejected the API key (HTTP 401: {detail}). Check the key in {env} "
    "(nagent.apiKeyEnv) and nagent.baseUrl.",
    403: "The model server at {where} refused access (HTTP 403: {detail}). Check that the key in {env} may use "
    "model '{model}'.",
    404: "HTTP 404 from {where}: {detail}. Check nagent.model ('{model}') and nagent.baseUrl (OpenAI-compatible "
    "servers usually end in /v1).",
    429: "rate limited by {where} (HTTP 429: {detail}); check the account's quota or try again later",
    500: "server error from {where} (HTTP {code}: {detail})",
    0: "The model server at {where} rejected the request (HTTP {code}: {detail}).",
}


class _TaskCancelled(ModelCancelled, asyncio.CancelledError):
    """Raised when the calling task is cancelled: callers may catch ModelCancelled, and asyncio still
    sees a CancelledError, so task cancellation semantics are preserved."""


# Endpoints (display base URLs) that refused streaming, or its `stream_options`, in this process: they get plain
# calls (or streams without usage) from then on, so the refusal costs one request per endpoint, not one per call.
_PLAIN_ENDPOINTS: set[str] = set()
_NO_USAGE_ENDPOINTS: set[str] = set()
# A streaming request refused with one of these, its message naming `stream`, is asked again without it.
_STREAM_REFUSALS = (400, 404, 405, 415, 422, 501)

Delta = Callable[[str], None]


@dataclass
class _Call:
    """One completion's request; `params` adapt in place when the model refuses an optional one."""

    payload: list[Any]
    params: dict[str, Any]
    cancel: asyncio.Event | None
    on_delta: Delta | None = None
    stream: bool = True
    include_usage: bool = True
    adapted: set[str] = field(default_factory=set)


@dataclass
class _Received:
    """What one attempt got so far: whether its reply began (then it is never retried), the text, the figures."""

    started: float = field(default_factory=time.monotonic)
    last: float = 0.0  # monotonic time of the last chunk (0: none yet)
    began: bool = False  # a 200 came: the server is generating
    streaming: bool = False  # the request asked for a stream
    chunks: int = 0
    parts: list[str] = field(default_factory=list)
    finish: str | None = None
    usage: Any = None

    def take(self, chunk: Any, on_delta: Delta | None) -> None:
        self.last = time.monotonic()
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue
            piece = getattr(getattr(choice, "delta", None), "content", None)
            if piece:
                self.parts.append(piece)
                if on_delta is not None:
                    on_delta(piece)
            if getattr(choice, "finish_reason", None):
                self.finish = choice.finish_reason

    def where_in_reply(self) -> str:
        """For an error: how far the reply had come."""
        if not self.began:
            return "before answering"
        if not self.parts:
            return "after its reply began, before any text"
        return f"after {estimate_tokens(''.join(self.parts))} tokens of its reply (estimated)"


@dataclass(frozen=True)
class _Failure:
    message: str  # already redacted
    transient: bool = False  # may pass on another attempt (408/409/429/5xx, a refused connection): nothing began
    retry_after: float | None = None  # seconds the server asked to wait (Retry-After, retry-after-ms)
    drop_param: str | None = None  # an optional parameter the server refused; call again without it


def not_configured_message(api_key_env: str) -> str:
    named = (
        f"set {api_key_env} (or the variable named by nagent.apiKeyEnv)"
        if api_key_env == "OPENAI_API_KEY"
        else f"set {api_key_env} (the variable named by nagent.apiKeyEnv)"
    )
    return (
        f"No model configured: {named}, or nagent.baseUrl / OPENAI_BASE_URL for a local "
        "OpenAI-compatible server (Ollama, vLLM, llama.cpp)."
    )


class OpenAIChatModel:
    """One configured chat model. Build a new one when settings change; it is cheap."""

    def __init__(
        self,
        settings: Settings,
        environ: Mapping[str, str] | None = None,
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff_scale: float = 1.0,
    ):
        """`attempts`: requests per call, retries included. `backoff_scale` multiplies our backoff between them
        (tests shrink it); a server's Retry-After is honoured as sent."""
        env = process_environ() if environ is None else environ  # the held key variables count
        self.model = settings.model
        self.api_key_env = settings.apiKeyEnv
        self.temperature: float | None = settings.temperature
        self.max_output_tokens = settings.maxOutputTokens
        self.request_timeout = settings.requestTimeout  # silence allowed: no byte for this long
        self.request_deadline = settings.requestDeadline  # one request, end to end
        self.attempts = max(1, attempts)
        self.backoff_scale = backoff_scale
        # Settings already fold OPENAI_BASE_URL in; reading it here too keeps `environ` the whole truth.
        self.base_url: str | None = settings.baseUrl or env.get("OPENAI_BASE_URL") or None
        self._key: str | None = settings.api_key(env)
        # OpenAI's reasoning models want max_completion_tokens; compatible servers mostly know max_tokens.
        is_openai = urlsplit(self.base_url or OPENAI_BASE_URL).hostname == "api.openai.com"
        self._tokens_param = "max_completion_tokens" if is_openai else "max_tokens"
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._warming: asyncio.Future[Any] | None = None

    # -- public ----------------------------------------------------------------------------------------

    @property
    def configured(self) -> bool:
        return bool(self._key or self.base_url)

    @property
    def display_base_url(self) -> str:
        """The endpoint for messages and status: user:password@ stripped."""
        return strip_userinfo(self.base_url or OPENAI_BASE_URL)

    def __repr__(self) -> str:
        return (
            f"OpenAIChatModel(model={self.model!r}, baseUrl={self.display_base_url!r}, "
            f"apiKeyEnv={self.api_key_env!r}, keySet={self._key is not None})"
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        cancel: asyncio.Event | None = None,
        stop: list[str] | None = None,
        on_delta: Delta | None = None,
    ) -> Reply:
        """Send role-separated messages, return the reply with token usage; `on_delta` gets each piece of the
        reply's text as it arrives (all of it, in order, once the reply is whole).

        Raises ModelNotConfigured, ModelCancelled (cancel event set, or this task cancelled) or ModelError.
        """
        self._require_configured()
        try:
            if self._warming is not None:
                warming, self._warming = self._warming, None
                await asyncio.wait({warming})  # its failure is the next line's to raise, with our message
            return await self._complete(self._loop_client(), self._start(messages, stop, cancel, on_delta))
        except asyncio.CancelledError:
            raise _TaskCancelled("The model call was cancelled.") from None

    def complete_sync(
        self,
        messages: Sequence[Message],
        *,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        on_delta: Delta | None = None,
    ) -> Reply:
        """Blocking form for worker threads (history summaries; never an event loop's thread): the same call as
        `complete`, on an event loop and a client of its own. Setting `cancel` ends the call within a fraction of a
        second: before a request, in a retry wait, or by closing the connection of the request in flight."""
        self._require_configured()
        return asyncio.run(self._complete_detached(self._start(messages, stop, None, on_delta), cancel))

    def prepare(self) -> None:
        """Start making this loop's client in a worker thread (the SDK's import in a new process, and the client:
        25-55 ms) while the caller assembles what it will send; the first `complete` waits for it. Called on the
        event loop; nothing when the model is not configured or its client is already there."""
        loop = asyncio.get_running_loop()
        if not self.configured or self._warming is not None or self._client_loop is loop:
            return
        key = self._client_key()
        self._warming = loop.run_in_executor(None, _shared_client, loop, key, self._new_client)
        # a run that ends before its first request never looks: its failure is not an unretrieved error
        self._warming.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _client_key(self) -> _ClientKey:
        return (self.base_url or OPENAI_BASE_URL, self._key, self.request_timeout)

    async def aclose(self) -> None:
        """This model is done: its (shared) client stays open for the next run on the loop (`_shared_client`)."""
        self._client, self._client_loop = None, None

    # -- the call --------------------------------------------------------------------------------------
    # Failures become values (already redacted) inside the `except`, and are raised only outside it, so no
    # ModelError ever chains the SDK's exception, whose request object holds the key.

    async def _complete(self, client: openai.AsyncOpenAI, call: _Call) -> Reply:
        """The call: attempts, each within requestDeadline and requestTimeout's silence, with a backoff (or the
        server's Retry-After) between them, until a reply, a failure that another attempt would not change or that
        began a reply, or `attempts` requests."""
        attempt = 1
        while True:
            got = _Received()
            try:
                response = await _race(functools.partial(self._attempt, client, call, attempt, got), call.cancel)
            except (_sdk().OpenAIError, ValueError, TimeoutError) as exc:
                response = self._failure(exc, got)
            if isinstance(response, _Failure) and self._retries(response, attempt, call):
                await self._pause(response, attempt, call)
                attempt += 1
                continue
            if (reply := self._settle(call, response, attempt)) is not None:
                return reply

    async def _attempt(self, client: openai.AsyncOpenAI, call: _Call, attempt: int, got: _Received) -> Reply | _Failure:
        """One request within requestDeadline; the silence bound is the SDK's per-read timeout (`_new_client`).
        A stream is read chunk by chunk, each piece handed to `on_delta`; leaving the block (the end, an error, a
        cancel) closes the response, so an abandoned generation's connection is shut, never left to run on."""
        headers = {RETRY_COUNT_HEADER: str(attempt - 1)}
        got.streaming = call.stream
        async with asyncio.timeout(self.request_deadline):
            if not call.stream:
                response = await client.chat.completions.create(
                    model=self.model, messages=call.payload, extra_headers=headers, **call.params
                )
                got.began = True
                reply = self._reply(call.payload, response)
                if isinstance(reply, Reply) and reply.text and call.on_delta is not None:
                    call.on_delta(reply.text)  # a plain reply is one delta: streaming callers see it all the same
                return reply
            extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if call.include_usage else {}
            # The SDK makes the request (status errors, timeouts); the body is read by llm.sse, not as a typed model
            # per chunk (250 µs of CPU each, issue 29).
            request = client.chat.completions.with_streaming_response.create(
                model=self.model, messages=call.payload, extra_headers=headers, stream=True, **extra, **call.params
            )
            async with request as response:
                got.began = True
                await _read_stream(response, got, call.on_delta)
        return self._streamed(call.payload, got)

    async def _complete_detached(self, call: _Call, cancel: threading.Event | None) -> Reply:
        """`complete_sync`'s call, on this thread's own loop: `cancel` (a threading.Event) is mirrored into the
        asyncio event the call path watches, and the client lives and dies with the call."""
        client, stop = self._new_client(), asyncio.Event()
        if cancel is not None:
            call.cancel = asyncio.Event()
            if cancel.is_set():  # set before the call: nothing is sent
                call.cancel.set()
            mirror = asyncio.ensure_future(_mirror(cancel, call.cancel, stop))
        try:
            return await self._complete(client, call)
        finally:
            stop.set()
            if cancel is not None:
                await mirror
            await client.close()

    def _retries(self, failure: _Failure, attempt: int, call: _Call) -> bool:
        """Whether to make another attempt after `failure`: a transient one, attempts left, not cancelled, and no
        Retry-After longer than we wait."""
        if not failure.transient or attempt >= self.attempts:
            return False
        if call.cancel is not None and call.cancel.is_set():
            return False
        return failure.retry_after is None or failure.retry_after <= MAX_RETRY_AFTER

    async def _pause(self, failure: _Failure, attempt: int, call: _Call) -> None:
        """The wait before attempt `attempt + 1`: what the server asked, else our backoff; announced when long."""
        asked = failure.retry_after is not None and failure.retry_after > 0
        if asked:
            delay = float(failure.retry_after or 0)
        else:
            backoff = min(INITIAL_RETRY_DELAY * 2.0 ** (attempt - 1), MAX_RETRY_DELAY)
            delay = backoff * (1 - 0.25 * random.random()) * self.backoff_scale
        log.info("model call failed; retrying in %.2fs (%d retries left)", delay, self.attempts - attempt)
        notice = retry_notice.get()
        if notice is not None and delay >= NOTICE_WAIT:
            notice(delay, "the model server asked to wait (Retry-After)" if asked else "the model call failed")
        await _race(lambda: asyncio.sleep(delay), call.cancel)

    def _start(
        self, messages: Sequence[Message], stop: list[str] | None, cancel: asyncio.Event | None, on_delta: Delta | None
    ) -> _Call:
        params: dict[str, Any] = {self._tokens_param: self.max_output_tokens}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if stop:
            params["stop"] = stop
        endpoint = self.display_base_url
        return _Call(
            [{"role": m.role, "content": m.content} for m in messages],
            params,
            cancel,
            on_delta,
            stream=endpoint not in _PLAIN_ENDPOINTS,
            include_usage=endpoint not in _NO_USAGE_ENDPOINTS,
        )

    def _settle(self, call: _Call, response: Reply | _Failure, attempt: int) -> Reply | None:
        """The reply; None when the call's params were adapted to a refused parameter (call again); else raise."""
        if isinstance(response, Reply):
            return response
        failure = response
        if call.cancel is not None and call.cancel.is_set():  # the failure is the shut connection of a cancelled call
            raise ModelCancelled("The model call was cancelled.")
        if failure.drop_param and failure.drop_param not in call.adapted:
            # Some models refuse temperature or max_tokens, some servers streaming: adapt once per parameter.
            call.adapted.add(failure.drop_param)
            self._adapt(call, failure.drop_param)
            log.info("%s refused '%s'; adjusting and calling again", self.display_base_url, failure.drop_param)
            return None
        if attempt > 1:
            raise ModelError(f"The model call failed after {attempt} attempts: {failure.message}", retryable=False)
        # A transient failure is worth another call only when this adapter was not allowed to retry it itself.
        raise ModelError(failure.message, retryable=failure.transient and self.attempts == 1)

    def _reply(self, payload: list[Any], response: Any) -> Reply | _Failure:
        choices = getattr(response, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            return _Failure(f"the reply from {self.display_base_url} held no message")
        text = choices[0].message.content or ""
        return Reply(text, self._usage(payload, text, getattr(response, "usage", None)), choices[0].finish_reason)

    def _streamed(self, payload: list[Any], got: _Received) -> Reply | _Failure:
        if not got.chunks:
            return _Failure(f"the stream from {self.display_base_url} ended without a reply")
        text = "".join(got.parts)
        return Reply(text, self._usage(payload, text, got.usage), got.finish)

    def _usage(self, payload: list[Any], text: str, usage: Any) -> Usage:
        """The server's own figures when it sent them, else the estimate (marked so)."""
        if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None:
            counted = Usage(usage.prompt_tokens, usage.completion_tokens, cache_read=_cached_tokens(usage))
        else:
            counted = Usage(
                estimate_tokens("".join(str(m["content"]) for m in payload)), estimate_tokens(text), estimated=True
            )
        log.debug("model %s answered: %s", self.model, counted)
        return counted

    def _failure(self, exc: Exception, got: _Received) -> _Failure:
        openai, where = _sdk(), self.display_base_url
        elapsed = time.monotonic() - got.started
        if isinstance(exc, TimeoutError):  # ours: the deadline
            return _Failure(
                f"{where} was still answering at nagent.requestDeadline ({self.request_deadline:g}s), "
                f"{got.where_in_reply()}; the call was cut (raise requestDeadline for long answers)"
            )
        if isinstance(exc, openai.APITimeoutError):  # the SDK's per-read timeout: silence
            quiet = time.monotonic() - (got.last or got.started)
            return _Failure(
                f"{where} stalled: no byte for {self.request_timeout:g}s (nagent.requestTimeout) "
                f"{got.where_in_reply()}, {elapsed:.1f}s into the call ({quiet:.1f}s silent); the call was cut "
                "(raise requestTimeout for a model slow to start)"
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = self._scrub(type(exc.__cause__ or exc.__context__ or exc).__name__)
            if got.began:
                return _Failure(
                    f"the connection to {where} was dropped {got.where_in_reply()}, {elapsed:.1f}s into the call "
                    f"({cause}); not retried, a generation was under way"
                )
            hint = "check nagent.baseUrl and that the server is running"
            return _Failure(f"the connection to {where} failed or was dropped ({cause}); {hint}", transient=True)
        if isinstance(exc, openai.APIStatusError):
            return self._status_failure(exc, got)
        if isinstance(exc, openai.APIError):  # an error event inside a stream
            detail = self._scrub(str(getattr(exc, "message", "") or type(exc).__name__))
            return _Failure(f"{where} reported an error {got.where_in_reply()}: {detail}")
        return _Failure(f"unreadable reply from {where} ({self._scrub(type(exc).__name__)})")

    def _status_failure(self, exc: Any, got: _Received) -> _Failure:
        where = self.display_base_url
        code, body = exc.status_code, exc.body  # body: the JSON `error` object, or the text
        detail = (body.get("message") or body.get("detail") or body) if isinstance(body, Mapping) else body
        detail = self._scrub(str(detail or exc.response.reason_phrase or "no detail"))
        if code == 400 and exc.param in ("temperature", self._tokens_param) and "unsupported" in detail.lower():
            return _Failure(f"HTTP 400 from {where}: {detail}", drop_param=exc.param)
        refused = _stream_refusal(code, exc.param, detail) if got.streaming and not got.began else None
        if refused is not None:
            return _Failure(f"HTTP {code} from {where}: {detail}", drop_param=refused)
        template = _STATUS_MESSAGES.get(min(code, 500), _STATUS_MESSAGES[0])
        fields = {"where": where, "code": code, "detail": detail, "env": self.api_key_env, "model": self.model}
        headers = exc.response.headers
        transient = code in _TRANSIENT or code >= 500  # 400/401/403/404… answer alike every time
        told = headers.get("x-should-retry")  # a server that says whether to retry is obeyed
        if told in ("true", "false"):
            transient = told == "true"
        return _Failure(template.format(**fields), transient=transient, retry_after=_retry_after(headers))

    def _adapt(self, call: _Call, param: str) -> None:
        params = call.params
        if param == "stream":
            call.stream = False
            _PLAIN_ENDPOINTS.add(self.display_base_url)
        elif param == "stream_options":
            call.include_usage = False
            _NO_USAGE_ENDPOINTS.add(self.display_base_url)
        elif param == "temperature":
            params.pop("temperature", None)
            self.temperature = None
        elif param in ("max_tokens", "max_completion_tokens"):
            other = "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"
            params[other] = params.pop(param, self.max_output_tokens)
            self._tokens_param = other

    # -- plumbing --------------------------------------------------------------------------------------

    def _require_configured(self) -> None:
        if not self.configured:
            raise ModelNotConfigured(not_configured_message(self.api_key_env))

    def _scrub(self, text: str) -> str:
        """Remove the key (and any bearer token) from text that came from the server or the SDK."""
        if self._key:
            text = text.replace(self._key, "[redacted]")
        text = re.sub(r"(?i)(bearer\s+)[^\s'\",}]+", r"\1[redacted]", text)
        return text[:500]

    def _new_client(self) -> openai.AsyncOpenAI:
        openai = _sdk()
        # The SDK's timeout bounds each connect and read: requestTimeout is the silence allowed; `_attempt` bounds
        # the whole request (requestDeadline). Its retries are off: ours retry only what never began, and need none
        # of its private hooks to scale, announce or cancel a wait.
        return openai.AsyncOpenAI(
            api_key=self._key or PLACEHOLDER_KEY,
            base_url=self.base_url or OPENAI_BASE_URL,
            timeout=self.request_timeout,
            max_retries=0,
        )

    def _loop_client(self) -> openai.AsyncOpenAI:
        # Connection pools are bound to the loop that made them: one client per running loop, shared by every
        # model of the process with the same endpoint, key and silence bound (`_shared_client`).
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client, self._client_loop = _shared_client(loop, self._client_key(), self._new_client), loop
        return self._client


# Building a client costs 25-55 ms (the SDK's TLS context loads the CA bundle even for a plain-HTTP endpoint), and
# every run paid it before its first request while each run made its own: ~60 of the 85 ms of nagent's work before
# the request in benchmarks/streaming.py. A client made once per event loop and configuration also keeps its
# connections open between runs. Runs only drop their reference (`aclose`); a client is never closed under another
# run's request. Bounded: past SHARED_CLIENTS configurations (settings changed that often), the oldest is forgotten
# and the collector closes it once no run holds it.
SHARED_CLIENTS = 8
_ClientKey = tuple[str, "str | None", float]
_shared: dict[tuple[int, _ClientKey], tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI]] = {}
_shared_lock = threading.Lock()


def _shared_client(
    loop: asyncio.AbstractEventLoop, key: _ClientKey, make: Callable[[], openai.AsyncOpenAI]
) -> openai.AsyncOpenAI:
    """The client of `loop` for `key`, made with `make` when there is none. Called on the loop or, by `prepare`, in
    a worker thread; the lock is not held while a client is made (the loop's thread must never wait that long)."""
    with _shared_lock:
        for stale in [k for k, (owner, _c) in _shared.items() if owner.is_closed()]:
            del _shared[stale]  # a finished loop (a test's, a CLI run's): its pools can never be used again
        found = _shared.get((id(loop), key))
        if found is not None and found[0] is loop:
            return found[1]
    client = make()
    with _shared_lock:
        found = _shared.get((id(loop), key))
        if found is not None and found[0] is loop:
            return found[1]  # made meanwhile by another caller: one client per loop and configuration
        _shared[(id(loop), key)] = (loop, client)
        while len(_shared) > SHARED_CLIENTS:
            del _shared[next(iter(_shared))]
        return client


def _stream_refusal(code: int, param: str | None, detail: str) -> str | None:
    """'stream' or 'stream_options' when a status refuses streaming (or only its usage option), else None."""
    if code not in _STREAM_REFUSALS:
        return None
    said = f"{param or ''} {detail}".lower()
    if "stream_options" in said or "include_usage" in said:
        return "stream_options"
    if "stream" in said or code in (405, 415, 501):
        return "stream"
    return None


def _cached_tokens(usage: Any) -> int:
    """Input tokens served from the provider's prompt cache: OpenAI's `prompt_tokens_details.cached_tokens`
    (compatible servers that report none count 0)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None and isinstance(details, Mapping):
        cached = details.get("cached_tokens")
    return cached if isinstance(cached, int) and cached > 0 else 0


async def _read_stream(response: Any, got: _Received, on_delta: Delta | None) -> None:
    """The body of a streaming response into `got`, its errors raised as the SDK's own stream raises them."""
    openai = _sdk()
    lines = response.iter_lines()
    try:
        async for chunk in sse.chunks(lines):
            got.take(chunk, on_delta)
        await sse.drain(lines)  # the connection goes back to the shared client's pool
    except sse.ErrorEvent as err:
        raise openai.APIError(err.message, request=response.http_request, body=err.body) from err
    except sse.timeouts() as err:
        raise openai.APITimeoutError(request=response.http_request) from err
    except sse.transport_errors() as err:
        raise openai.APIConnectionError(request=response.http_request) from err


def _sdk() -> Any:
    import openai  # on first use, see _client_classes

    return openai


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a server asked to wait: retry-after-ms, else Retry-After (seconds or an HTTP date); None if neither
    is readable."""
    try:
        return float(headers.get("retry-after-ms", "")) / 1000
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    return seconds if math.isfinite(seconds) else None


async def _race(call: Any, cancel: asyncio.Event | None) -> Any:
    """Await the SDK call that `call()` makes; when `cancel` is set first, cancel it (closing its connection,
    or ending its retry wait) and raise ModelCancelled."""
    if cancel is None:
        return await call()
    if cancel.is_set():
        raise ModelCancelled("The model call was cancelled.")
    task, waiter = asyncio.ensure_future(call()), asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)  # lets httpx close the socket; never holds the caller longer
    if task.cancelled():
        raise ModelCancelled("The model call was cancelled.")
    return task.result()


async def _mirror(source: threading.Event, target: asyncio.Event, stop: asyncio.Event) -> None:
    """Set `target` once `source` (set from another thread) is; a 50 ms poll, until `stop`."""
    while not source.is_set():
        if stop.is_set():
            return
        await asyncio.sleep(0.05)
    target.set()


def strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
