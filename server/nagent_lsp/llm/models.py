"""The chat model a workflow uses: built from the session's settings, or a clear error naming what to set.

One place decides "is a model configured", so every command that needs one fails the same way.
"""

from __future__ import annotations

from typing import Any, Callable

from nagent_lsp.core.errors import UserError

ModelFactory = Callable[[Any, Any], Any]  # (settings, environ) -> a model with `configured` and `complete()`


def chat_model(settings: Any, environ: Any) -> Any:
    """The default factory: the openai adapter (imported lazily, so nothing else pays for importing openai)."""
    from nagent_lsp.llm.openai_chat import ChatModel

    return ChatModel(settings, environ)


def not_configured(settings: Any) -> UserError:
    from nagent_lsp.llm.openai_chat import not_configured_message

    return UserError(not_configured_message(settings.apiKeyEnv))


def require_model(session: Any, factory: ModelFactory | None = None) -> Any:
    """A configured model for this session, or a UserError saying which setting or variable to set."""
    settings = session.settings
    environ = getattr(session, "environ", None)
    if not settings.model_configured(environ):
        raise not_configured(settings)
    return (factory or chat_model)(settings, environ)


def optional_model(session: Any) -> Any | None:
    """A configured model, or None (for work that is only better with a model, such as commit summaries)."""
    settings = session.settings
    environ = getattr(session, "environ", None)
    return chat_model(settings, environ) if settings.model_configured(environ) else None
