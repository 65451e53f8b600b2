"""Model access: role-separated chat messages in, text + token usage out (adapter in nagent_lsp.llm.openai_chat)."""

from __future__ import annotations

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


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    finish_reason: str | None = None


class ModelError(RuntimeError):
    """A failure the user must act on; the message says what (never holds the API key)."""


class ModelNotConfigured(ModelError):
    pass


class ModelCancelled(ModelError):
    pass


def estimate_tokens(text: str) -> int:
    """ceil(chars / 4), 0 for empty: the fallback when a provider reports no usage."""
    return (len(text) + 3) // 4 if text else 0
