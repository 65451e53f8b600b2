"""Model access: role-separated chat messages in, text + token usage out (adapter in nagent_lsp.llm.openai_chat)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Usage:
    input: int
    output: int
    estimated: bool = False
    cache_read: int = 0  # of `input`, tokens the provider served from its prompt cache (DESIGN §11)


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    finish_reason: str | None = None


class ModelError(RuntimeError):
    """A failure the user must act on; the message says what (never holds the API key).

    `retryable` tells a caller whether asking again may get a different answer. False when it cannot: the
    provider refused the request itself (a rejected key, no access, no such model, a bad request), or the adapter
    has already retried it as far as it should (rate limits, server errors, timeouts are retried inside the
    adapter, honouring Retry-After). True only for a failure the adapter did not retry and that may pass."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class ModelNotConfigured(ModelError):
    pass


class ModelCancelled(ModelError):
    pass


# What the adapter calls while it waits before retrying a request (seconds, why), so a long wait (a server's
# Retry-After) can be shown to the user; set by whoever shows progress, for the calls made in its context.
RetryNotice = Callable[[float, str], None]
retry_notice: ContextVar[RetryNotice | None] = ContextVar("retry_notice", default=None)


def estimate_tokens(text: str) -> int:
    """ceil(chars / 4), 0 for empty: the fallback when a provider reports no usage."""
    return (len(text) + 3) // 4 if text else 0
