"""Chat completions through the openai SDK: the only module that imports `openai` (DESIGN §3).

Works against OpenAI and any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through the base URL.
Retries are ours alone (the SDK's are off): 429, 5xx, timeouts, dropped connections and unreadable
replies are retried with exponential backoff and jitter, honouring Retry-After; other 4xx fail at once.
The API key is held privately and scrubbed from every message this module produces or logs.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from nagent_lsp.core.model import Message, ModelCancelled, ModelError, ModelNotConfigured, Reply, Usage, estimate_tokens
from nagent_lsp.config.settings import Settings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers ignore the key, but the SDK (and some proxies) insist on an Authorization header.
PLACEHOLDER_KEY = "nagent-no-key"
DEFAULT_ATTEMPTS = 4


class _TaskCancelled(ModelCancelled, asyncio.CancelledError):
    """Raised when the calling task is cancelled: callers may catch ModelCancelled, and asyncio still
    sees a CancelledError, so task cancellation semantics are preserved."""


@dataclass(frozen=True)
class _Failure:
    message: str  # already redacted
    retryable: bool
    retry_after: float | None = None
    drop_param: str | None = None  # an optional parameter the server refused; retry without it


def not_configured_message(api_key_env: str) -> str:
    named = (f"set {api_key_env} (or the variable named by nagent.apiKeyEnv)" if api_key_env == "OPENAI_API_KEY"
             else f"set {api_key_env} (the variable named by nagent.apiKeyEnv)")
    return (f"No model configured: {named}, or nagent.baseUrl / OPENAI_BASE_URL for a local "
            "OpenAI-compatible server (Ollama, vLLM, llama.cpp).")


class ChatModel:
    """One configured chat model. Build a new one when settings change; it is cheap."""

    def __init__(
        self,
        settings: Settings,
        environ: Mapping[str, str] | None = None,
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
    ):
        env = os.environ if environ is None else environ
        self.model = settings.model
        self.api_key_env = settings.apiKeyEnv
        self.temperature: float | None = settings.temperature
        self.max_output_tokens = settings.maxOutputTokens
        self.request_timeout = settings.requestTimeout
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        # Settings already fold OPENAI_BASE_URL in; reading it here too keeps `environ` the whole truth.
        self.base_url: str | None = settings.baseUrl or env.get("OPENAI_BASE_URL") or None
        self._key: str | None = settings.api_key(env)
        # OpenAI's reasoning models want max_completion_tokens; compatible servers mostly know max_tokens.
        self._tokens_param = "max_completion_tokens" if self._is_openai() else "max_tokens"
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
        return (f"ChatModel(model={self.model!r}, baseUrl={self.display_base_url!r}, "
                f"apiKeyEnv={self.api_key_env!r}, keySet={self._key is not None})")

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
        try:
            return await self._complete(messages, cancel, stop, self._loop_client())
        except asyncio.CancelledError:
            raise _TaskCancelled("The model call was cancelled.") from None

    def complete_sync(
        self,
        messages: Sequence[Message],
        *,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """Blocking form for worker threads (history summaries); never call it on an event loop's thread."""
        self._require_configured()
        return asyncio.run(self._complete_isolated(list(messages), stop, cancel))

    async def aclose(self) -> None:
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    # -- the call --------------------------------------------------------------------------------------

    async def _complete_isolated(self, messages: list[Message], stop: list[str] | None,
                                 cancel: threading.Event | None) -> Reply:
        # A fresh client per sync call: connection pools are bound to the loop that made them.
        client = self._new_client()
        event = asyncio.Event()
        bridge = asyncio.ensure_future(_bridge(cancel, event)) if cancel is not None else None
        try:
            return await self._complete(messages, event, stop, client)
        finally:
            if bridge is not None:
                bridge.cancel()
            await client.close()

    async def _complete(self, messages: Sequence[Message], cancel: asyncio.Event | None,
                        stop: list[str] | None, client: openai.AsyncOpenAI) -> Reply:
        payload = [{"role": m.role, "content": m.content} for m in messages]
        params: dict[str, Any] = {self._tokens_param: self.max_output_tokens}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if stop:
            params["stop"] = stop
        failure: _Failure | None = None
        attempt = 0
        adapted: set[str] = set()
        while attempt < self.attempts:
            attempt += 1
            if cancel is not None and cancel.is_set():
                raise ModelCancelled("The model call was cancelled.")
            started = time.monotonic()
            result = await self._attempt(client, payload, params, cancel)
            if isinstance(result, Reply):
                log.debug("model %s answered in %.2fs (attempt %d): %d in / %d out tokens%s", self.model,
                          time.monotonic() - started, attempt, result.usage.input, result.usage.output,
                          " (estimated)" if result.usage.estimated else "")
                return result
            failure = result
            if failure.drop_param and failure.drop_param not in adapted:
                # Some models refuse temperature or max_tokens: adapt once per parameter (and remember it),
                # without counting it as an attempt.
                adapted.add(failure.drop_param)
                attempt -= 1
                self._adapt(params, failure.drop_param)
                log.info("model %s refused '%s'; adjusting and retrying", self.model, failure.drop_param)
                continue
            if not failure.retryable or attempt >= self.attempts:
                break
            delay = self._delay(attempt, failure.retry_after)
            log.info("model call attempt %d/%d failed (%s); retrying in %.2fs",
                     attempt, self.attempts, failure.message, delay)
            await _sleep(delay, cancel)
        assert failure is not None
        if failure.retryable:
            raise ModelError(f"The model call failed after {attempt} attempts: {failure.message}")
        raise ModelError(failure.message)

    async def _attempt(self, client: openai.AsyncOpenAI, payload: list[dict], params: dict[str, Any],
                       cancel: asyncio.Event | None) -> Reply | _Failure:
        """One HTTP call. Failures come back as values (already redacted), so no raised ModelError
        ever chains the SDK's exception, whose request object holds the key."""
        openai = _sdk()
        call = client.chat.completions.create(model=self.model, messages=payload, **params)
        try:
            response = await _race(call, cancel)
        except openai.APITimeoutError:
            return _Failure(f"no answer within nagent.requestTimeout ({self.request_timeout:g}s) from "
                            f"{self.display_base_url}; raise requestTimeout for a slow model", True)
        except openai.APIConnectionError as exc:
            return _Failure(f"the connection to {self.display_base_url} failed or was dropped "
                            f"({self._scrub(_cause(exc))}); check nagent.baseUrl and that the server is running", True)
        except openai.APIStatusError as exc:
            return self._status_failure(exc)
        except (openai.APIResponseValidationError, ValueError) as exc:
            return _Failure(f"unreadable reply from {self.display_base_url} ({self._scrub(type(exc).__name__)})", True)
        return self._reply(payload, response)

    def _reply(self, payload: list[dict], response: Any) -> Reply | _Failure:
        choices = getattr(response, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            return _Failure(f"the reply from {self.display_base_url} held no message", True)
        text = choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None:
            counted = Usage(usage.prompt_tokens, usage.completion_tokens)
        else:
            counted = Usage(estimate_tokens("".join(str(m["content"]) for m in payload)), estimate_tokens(text),
                            estimated=True)
        return Reply(text, counted, choices[0].finish_reason)

    def _status_failure(self, exc: openai.APIStatusError) -> _Failure:
        code = exc.status_code
        detail, param = _error_detail(exc)
        detail = self._scrub(detail)
        where = self.display_base_url
        if code == 429:
            return _Failure(f"rate limited by {where} (HTTP 429: {detail}); check the account's quota or try "
                            "again later", True, _retry_after(exc))
        if code >= 500:
            return _Failure(f"server error from {where} (HTTP {code}: {detail})", True, _retry_after(exc))
        if code == 400 and param in ("temperature", self._tokens_param) and "unsupported" in detail.lower():
            return _Failure(f"HTTP 400 from {where}: {detail}", False, drop_param=param)
        if code == 401:
            return _Failure(f"The model server at {where} rejected the API key (HTTP 401: {detail}). Check the "
                            f"key in {self.api_key_env} (nagent.apiKeyEnv) and nagent.baseUrl.", False)
        if code == 403:
            return _Failure(f"The model server at {where} refused access (HTTP 403: {detail}). Check that the key in "
                            f"{self.api_key_env} may use model '{self.model}'.", False)
        if code == 404:
            return _Failure(f"HTTP 404 from {where}: {detail}. Check nagent.model ('{self.model}') and "
                            "nagent.baseUrl (OpenAI-compatible servers usually end in /v1).", False)
        return _Failure(f"The model server at {where} rejected the request (HTTP {code}: {detail}).", False)

    def _adapt(self, params: dict[str, Any], param: str) -> None:
        if param == "temperature":
            params.pop("temperature", None)
            self.temperature = None
        elif param in ("max_tokens", "max_completion_tokens"):
            other = "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"
            params[other] = params.pop(param, self.max_output_tokens)
            self._tokens_param = other

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), max(self.max_delay, 60.0))
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * random.uniform(0.5, 1.0)  # jitter: concurrent callers do not retry in lockstep

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

    def _is_openai(self) -> bool:
        host = urlsplit(self.base_url or OPENAI_BASE_URL).hostname or ""
        return host == "api.openai.com"

    def _new_client(self) -> openai.AsyncOpenAI:
        return _sdk().AsyncOpenAI(
            api_key=self._key or PLACEHOLDER_KEY,
            base_url=self.base_url or OPENAI_BASE_URL,
            timeout=self.request_timeout,
            max_retries=0,  # ours are the only retries
        )

    def _loop_client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client, self._client_loop = self._new_client(), loop
        return self._client


def _sdk() -> Any:
    # Imported on first use: the SDK takes over half a second to import, which server start-up and
    # model-less commands should not pay.
    import openai

    return openai


async def _race(call: Any, cancel: asyncio.Event | None) -> Any:
    """Await the SDK call; when `cancel` is set first, cancel it (closing its connection) and raise."""
    if cancel is None:
        return await call
    task = asyncio.ensure_future(call)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            # Give httpx a moment to close the socket, but never hold the caller past a second.
            await asyncio.wait({task}, timeout=1.0)
    if task.cancelled():
        raise ModelCancelled("The model call was cancelled.")
    return task.result()


async def _sleep(delay: float, cancel: asyncio.Event | None) -> None:
    if cancel is None:
        await asyncio.sleep(delay)
        return
    try:
        await asyncio.wait_for(cancel.wait(), delay)
    except asyncio.TimeoutError:
        return
    raise ModelCancelled("The model call was cancelled.")


async def _bridge(source: threading.Event, target: asyncio.Event) -> None:
    while not source.is_set():
        await asyncio.sleep(0.05)
    target.set()


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    return type(inner).__name__ if inner is not None else type(exc).__name__


def _error_detail(exc: openai.APIStatusError) -> tuple[str, str | None]:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            message = error.get("message") or error.get("detail") or ""
            param = error.get("param")
            return str(message or body), param if isinstance(param, str) else None
        return str(error), None
    if body:
        return str(body), None
    try:
        return exc.response.text or exc.response.reason_phrase, None
    except Exception:  # a streamed or unread body
        return exc.response.reason_phrase or "no detail", None


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
