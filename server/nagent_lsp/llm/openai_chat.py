"""Chat completions through the openai SDK: the only module that imports `openai` (DESIGN §3).

Works against OpenAI and any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through the base URL.
Retries are the SDK's (`max_retries`): 408, 409, 429, 5xx, timeouts and dropped connections, backing off
0.5 s doubling to 8 s with jitter, or as Retry-After / retry-after-ms say (up to 2 min). A 200 whose body
does not parse is not retried, by the SDK or us: the (billed) generation ran, and such a body is nearly
always a misconfigured endpoint that answers alike again; a body cut short on the wire is a transport
error, which the SDK retries. Ours: readable messages per failure, one adaptation when a model refuses
`temperature` or the max-tokens parameter, cancellation by an event, and the key never in an error or log.
Every ModelError says whether calling again could help (`retryable`, core.model): never for a refusal that
repeats (400/401/403/404) nor once the SDK's retries are spent, so callers do not multiply them; a retry wait of a
second or more is announced through core.model.retry_notice, so a long Retry-After shows in the editor's progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers ignore the key, but the SDK (and some proxies) insist on an Authorization header.
PLACEHOLDER_KEY = "nagent-no-key"
DEFAULT_ATTEMPTS = 4  # the SDK's max_retries=3
NOTICE_WAIT = 1.0  # seconds: a retry wait at least this long is shown to the user (core.model.retry_notice)
_TRANSIENT = (408, 409, 429)  # statuses the SDK retries, with 5xx
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


@dataclass
class _Call:
    """One completion's request; `params` adapt in place when the model refuses an optional one."""

    payload: list[Any]
    params: dict[str, Any]
    cancel: asyncio.Event | threading.Event | None
    adapted: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Failure:
    message: str  # already redacted
    attempts: int = 1  # requests the SDK made, its retries included
    drop_param: str | None = None  # an optional parameter the server refused; call again without it
    retryable: bool = False  # a failure that may pass on another call, and that the SDK did not retry itself


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
        """`backoff_scale` multiplies the SDK's own backoff (tests shrink it); a server's Retry-After is
        honoured as sent."""
        env = process_environ() if environ is None else environ  # the held key variables count
        self.model = settings.model
        self.api_key_env = settings.apiKeyEnv
        self.temperature: float | None = settings.temperature
        self.max_output_tokens = settings.maxOutputTokens
        self.request_timeout = settings.requestTimeout
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
    ) -> Reply:
        """Send role-separated messages, return the reply with token usage.

        Raises ModelNotConfigured, ModelCancelled (cancel event set, or this task cancelled) or ModelError.
        """
        self._require_configured()
        client, call = self._loop_client(), self._start(messages, stop, cancel)
        create = client.chat.completions.create
        try:
            while True:
                try:
                    response = await _race(
                        lambda: create(model=self.model, messages=call.payload, **call.params), cancel
                    )
                except (_sdk().OpenAIError, ValueError) as exc:
                    response = self._failure(exc)
                if (reply := self._settle(call, response)) is not None:
                    return reply
        except asyncio.CancelledError:
            raise _TaskCancelled("The model call was cancelled.") from None

    def complete_sync(
        self,
        messages: Sequence[Message],
        *,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """Blocking form for worker threads (history summaries; never an event loop's thread), on the SDK's
        sync client. Setting `cancel` ends the call within a fraction of a second: before a request, in a
        retry wait, or by shutting the connection of the request in flight."""
        self._require_configured()
        client, call = self._new_client(sync=True), self._start(messages, stop, cancel)
        client.cancel, done = cancel, threading.Event()
        try:
            if cancel is not None:
                threading.Thread(target=_watch, args=(cancel, done, client.abort), daemon=True).start()
            while True:
                try:
                    response = client.chat.completions.create(model=self.model, messages=call.payload, **call.params)
                except (_sdk().OpenAIError, ValueError) as exc:
                    response = self._failure(exc)
                if (reply := self._settle(call, response)) is not None:
                    return reply
        finally:
            done.set()
            client.close()

    async def aclose(self) -> None:
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    # -- the call --------------------------------------------------------------------------------------
    # Failures become values (already redacted) inside the `except`, and are raised only outside it, so no
    # ModelError ever chains the SDK's exception, whose request object holds the key.

    def _start(
        self, messages: Sequence[Message], stop: list[str] | None, cancel: asyncio.Event | threading.Event | None
    ) -> _Call:
        params: dict[str, Any] = {self._tokens_param: self.max_output_tokens}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if stop:
            params["stop"] = stop
        return _Call([{"role": m.role, "content": m.content} for m in messages], params, cancel)

    def _settle(self, call: _Call, response: Any) -> Reply | None:
        """The reply; None when the call's params were adapted to a refused parameter (call again); else raise."""
        failure = response if isinstance(response, _Failure) else self._reply(call.payload, response)
        if isinstance(failure, Reply):
            return failure
        if call.cancel is not None and call.cancel.is_set():  # the failure is the shut connection of a cancelled call
            raise ModelCancelled("The model call was cancelled.")
        if failure.drop_param and failure.drop_param not in call.adapted:
            # Some models refuse temperature or max_tokens: adapt once per parameter, and remember it.
            call.adapted.add(failure.drop_param)
            self._adapt(call.params, failure.drop_param)
            log.info("model %s refused '%s'; adjusting and retrying", self.model, failure.drop_param)
            return None
        if failure.attempts > 1:
            raise ModelError(
                f"The model call failed after {failure.attempts} attempts: {failure.message}", retryable=False
            )
        raise ModelError(failure.message, retryable=failure.retryable)

    def _reply(self, payload: list[Any], response: Any) -> Reply | _Failure:
        choices = getattr(response, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            return _Failure(f"the reply from {self.display_base_url} held no message")
        text = choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None:
            counted = Usage(usage.prompt_tokens, usage.completion_tokens, cache_read=_cached_tokens(usage))
        else:
            counted = Usage(
                estimate_tokens("".join(str(m["content"]) for m in payload)), estimate_tokens(text), estimated=True
            )
        log.debug("model %s answered: %s", self.model, counted)
        return Reply(text, counted, choices[0].finish_reason)

    def _failure(self, exc: Exception) -> _Failure:
        openai, where = _sdk(), self.display_base_url
        try:  # the SDK numbers its requests in this header: how many it made, retries included
            attempts = int(exc.request.headers.get("x-stainless-retry-count", 0)) + 1  # type: ignore[attr-defined]
        except (AttributeError, TypeError, ValueError):
            attempts = 1
        # Transient failures are the SDK's to retry; one is worth another call only when its retries are off.
        transient = self.attempts == 1
        if isinstance(exc, openai.APITimeoutError):
            timeout = f"nagent.requestTimeout ({self.request_timeout:g}s)"
            message = f"no answer within {timeout} from {where}; raise requestTimeout for a slow model"
            return _Failure(message, attempts, retryable=transient)
        if isinstance(exc, openai.APIConnectionError):
            cause = self._scrub(type(exc.__cause__ or exc.__context__ or exc).__name__)
            hint = "check nagent.baseUrl and that the server is running"
            message = f"the connection to {where} failed or was dropped ({cause}); {hint}"
            return _Failure(message, attempts, retryable=transient)
        if not isinstance(exc, openai.APIStatusError):
            return _Failure(f"unreadable reply from {where} ({self._scrub(type(exc).__name__)})", attempts)
        code, body = exc.status_code, exc.body  # body: the JSON `error` object, or the text
        detail = (body.get("message") or body.get("detail") or body) if isinstance(body, Mapping) else body
        detail = self._scrub(str(detail or exc.response.reason_phrase or "no detail"))
        if code == 400 and exc.param in ("temperature", self._tokens_param) and "unsupported" in detail.lower():
            return _Failure(f"HTTP 400 from {where}: {detail}", attempts, drop_param=exc.param)
        template = _STATUS_MESSAGES.get(min(code, 500), _STATUS_MESSAGES[0])
        fields = {"where": where, "code": code, "detail": detail, "env": self.api_key_env, "model": self.model}
        retryable = transient and (code in _TRANSIENT or code >= 500)  # 400/401/403/404… answer alike every time
        return _Failure(template.format(**fields), attempts, retryable=retryable)

    def _adapt(self, params: dict[str, Any], param: str) -> None:
        if param == "temperature":
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

    def _new_client(self, sync: bool) -> Any:
        async_client, sync_client = _client_classes()
        client = (sync_client if sync else async_client)(
            api_key=self._key or PLACEHOLDER_KEY,
            base_url=self.base_url or OPENAI_BASE_URL,
            timeout=self.request_timeout,
            max_retries=self.attempts - 1,
        )
        client.backoff_scale = self.backoff_scale
        return client

    def _loop_client(self) -> openai.AsyncOpenAI:
        # Connection pools are bound to the loop that made them: one client per running loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client, self._client_loop = self._new_client(sync=False), loop
        return self._client


def _cached_tokens(usage: Any) -> int:
    """Input tokens served from the provider's prompt cache: OpenAI's `prompt_tokens_details.cached_tokens`
    (compatible servers that report none count 0)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None and isinstance(details, Mapping):
        cached = details.get("cached_tokens")
    return cached if isinstance(cached, int) and cached > 0 else 0


def _sdk() -> Any:
    import openai  # on first use, see _client_classes

    return openai


@functools.cache
def _client_classes() -> tuple[type, type]:
    """The SDK's clients with small overrides. `_prepare_request` is the SDK's hook for subclasses;
    `_calculate_retry_timeout` and `_sleep_for_retry` are its retry loop's delay and wait (_base_client.py).
    Imported and defined on first use: the SDK takes over half a second to import, which server start-up
    and model-less commands should not pay."""
    import openai

    class Backoff:
        backoff_scale = 1.0

        def _calculate_retry_timeout(self, remaining_retries: int, options: Any, response_headers: Any = None) -> float:
            delay = super()._calculate_retry_timeout(remaining_retries, options, response_headers)  # type: ignore[misc]
            asked = bool(
                response_headers and ("retry-after" in response_headers or "retry-after-ms" in response_headers)
            )
            if not asked:
                delay *= self.backoff_scale  # the SDK's own backoff; a server's Retry-After is left as sent
            log.info("model call failed; retrying in %.2fs (%d retries left)", delay, remaining_retries)
            notice = retry_notice.get()
            if notice is not None and delay >= NOTICE_WAIT:
                notice(delay, "the model server asked to wait (Retry-After)" if asked else "the model call failed")
            return delay

    class AsyncClient(Backoff, openai.AsyncOpenAI):
        pass

    class SyncClient(Backoff, openai.OpenAI):
        """Cancelled by `cancel` (a threading.Event): checked before each request, it ends a retry wait
        early, and `abort()` shuts the socket of the request in flight (found by httpcore's trace extension)."""

        cancel: threading.Event | None = None
        _socket: Any = None

        def _prepare_request(self, request: Any) -> None:
            if self.cancel is not None:
                if self.cancel.is_set():
                    raise ModelCancelled("The model call was cancelled.")
                request.extensions["trace"] = self._trace

        def _trace(self, event: str, info: dict[str, Any]) -> None:
            if event.endswith((".connect_tcp.complete", ".start_tls.complete")):
                self._socket = info["return_value"].get_extra_info("socket")

        def abort(self) -> None:
            if self._socket is not None:
                # close() would not wake the thread blocked reading it; shutdown does. The plain socket's method:
                # ssl.SSLSocket's own would also drop the TLS object from under that thread.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(self._socket, socket.SHUT_RDWR)

        def _sleep_for_retry(self, *, retries_taken: int, max_retries: int, options: Any, response: Any) -> None:
            if self.cancel is None:
                return super()._sleep_for_retry(
                    retries_taken=retries_taken, max_retries=max_retries, options=options, response=response
                )
            # The SDK's wait, ended early by `cancel`: the next request's _prepare_request then raises.
            self.cancel.wait(
                self._calculate_retry_timeout(max_retries - retries_taken, options, getattr(response, "headers", None))
            )

    return AsyncClient, SyncClient


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


def _watch(cancel: threading.Event, done: threading.Event, abort: Any) -> None:
    # Aborts again while the call lasts: a connection opened as `cancel` was set is shut on the next round.
    while not done.wait(0.1):
        if cancel.is_set():
            abort()


def strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
