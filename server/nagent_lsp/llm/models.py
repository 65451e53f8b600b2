"""The chat model an operation uses: built from the settings, or a clear error naming what to set.

One place decides "is a model configured", so every command that needs one fails the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import ChatModel
from nagent_lsp.core.secret_env import process_environ


def chat_model(settings: Settings, environ: Mapping[str, str] | None) -> ChatModel:
    """The openai adapter (imported here, so nothing else pays for importing openai). `environ` None: the
    process's environment with its held key variables (core.secret_env), where the key is once started."""
    from nagent_lsp.llm.openai_chat import OpenAIChatModel

    return OpenAIChatModel(settings, process_environ() if environ is None else environ)


def require_model(settings: Settings, environ: Mapping[str, str] | None) -> ChatModel:
    """A configured model, or a UserError saying which setting or variable to set."""
    if not settings.model_configured(environ):
        from nagent_lsp.llm.openai_chat import not_configured_message

        raise UserError(not_configured_message(settings.apiKeyEnv))
    return chat_model(settings, environ)


def optional_model(settings: Settings, environ: Mapping[str, str] | None) -> ChatModel | None:
    """A configured model, or None (for work that is only better with a model, such as commit summaries)."""
    return chat_model(settings, environ) if settings.model_configured(environ) else None
