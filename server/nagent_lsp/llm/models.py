"""The chat model an operation uses: built from the settings, or a clear error naming what to set.

One place decides "is a model configured", so every command that needs one fails the same way, and one place
resolves model profiles (DESIGN §10): `model`, `summaryModel`, an agent's `model` and a recipe step's `model` may
name a profile of `settings.models` (or of a recipe's own `models`) or be a raw model id. A profile's unset fields
fall back to the top-level settings. Commit/file summaries, memory folds and conversation compaction use
`summaryModel` (default: `model`), each with its own output cap (`purpose_settings`); edits use `model`.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from nagent_lsp.config.settings import ModelProfile, Settings
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import ChatModel
from nagent_lsp.core.secret_env import process_environ


class UnknownProfile(UserError):
    """A name that must be a model profile is none (a recipe's `model`/`modelRef`)."""


def model_settings(
    settings: Settings,
    name: str | None = None,
    profiles: Mapping[str, ModelProfile] | None = None,
    *,
    strict: bool = False,
    where: str = "",
) -> Settings:
    """The settings a model call uses for `name` (None: `settings.model`): the profile's fields over the
    top-level ones. `profiles` (a recipe's own) are looked up before `settings.models`. A name that is no
    profile is a raw model id, unless `strict`, where it is an `UnknownProfile` error naming `where`."""
    wanted = name or settings.model
    profile = (profiles or {}).get(wanted) or settings.models.get(wanted)
    if profile is None:
        if strict:
            known = sorted({*(profiles or {}), *settings.models})
            hint = f"known profiles: {', '.join(known)}" if known else "no model profiles are defined (setting models)"
            raise UnknownProfile(f"{where}unknown model profile '{wanted}' ({hint})")
        return settings if wanted == settings.model else attrs.evolve(settings, model=wanted)
    return attrs.evolve(
        settings,
        model=profile.model,
        baseUrl=profile.baseUrl if profile.baseUrl is not None else settings.baseUrl,
        apiKeyEnv=profile.apiKeyEnv if profile.apiKeyEnv is not None else settings.apiKeyEnv,
        temperature=profile.temperature if profile.temperature is not None else settings.temperature,
        maxOutputTokens=profile.maxOutputTokens if profile.maxOutputTokens is not None else settings.maxOutputTokens,
    )


def summary_settings(settings: Settings) -> Settings:
    """The settings of summaries and compaction: `summaryModel`, else `model` (each may name a profile)."""
    return model_settings(settings, settings.summaryModel or settings.model)


# Each purpose's model call, bounded to what it produces (issue 23): a one-line commit summary needs tens of tokens,
# not an edit's 8,192 — a model that does not stop would generate them all. Purpose -> the setting of its cap.
PURPOSE_CAPS = {
    "edit": "maxOutputTokens",
    "commitSummary": "commitSummaryMaxTokens",
    "fileSummary": "fileSummaryMaxTokens",
    "memory": "memoryMaxTokens",
    "compaction": "compactionMaxTokens",
}


@attrs.frozen
class PurposeModel:
    """What one purpose's calls use: the model id and the output cap of one reply (tokens)."""

    purpose: str
    model: str
    maxOutputTokens: int
    capSetting: str  # the setting that bounds it


def purpose_settings(settings: Settings, purpose: str) -> Settings:
    """The settings of `purpose`'s calls: edits use `model`; summaries, memory folds and compaction `summaryModel`
    with their own cap (never above a profile's own `maxOutputTokens`)."""
    if purpose == "edit":
        return model_settings(settings)
    resolved = summary_settings(settings)
    cap = int(getattr(settings, PURPOSE_CAPS[purpose]))
    profile = settings.models.get(settings.summaryModel or settings.model)
    if profile is not None and profile.maxOutputTokens is not None:
        cap = min(cap, profile.maxOutputTokens)
    return attrs.evolve(resolved, maxOutputTokens=cap)


def purpose_models(settings: Settings) -> list[PurposeModel]:
    """Every purpose's model and cap, for `nagent.status`."""
    return [
        PurposeModel(purpose, used.model, used.maxOutputTokens, setting)
        for purpose, setting in PURPOSE_CAPS.items()
        for used in (purpose_settings(settings, purpose),)
    ]


def profile_price(settings: Settings, name: str | None = None) -> tuple[float, float] | None:
    """(input, output) price per million tokens of the profile `name` (None: `model`), if it has one."""
    profile = settings.models.get(name or settings.model)
    return (profile.price.input, profile.price.output) if profile and profile.price else None


def chat_model(settings: Settings, environ: Mapping[str, str] | None) -> ChatModel:
    """The openai adapter (imported here, so nothing else pays for importing openai). `environ` None: the
    process's environment with its held key variables (core.secret_env), where the key is once started.
    `settings` are used as given: resolve a profile first (`model_settings`)."""
    from nagent_lsp.llm.openai_chat import OpenAIChatModel

    return OpenAIChatModel(settings, process_environ() if environ is None else environ)


def require_model(settings: Settings, environ: Mapping[str, str] | None, name: str | None = None) -> ChatModel:
    """A configured model (`name`: a profile or raw id, default `model`), or a UserError saying which setting or
    variable to set."""
    return configured_model(model_settings(settings, name), environ)


def optional_model(settings: Settings, environ: Mapping[str, str] | None) -> ChatModel | None:
    """A configured model, or None (for work that is only better with a model, such as commit summaries)."""
    resolved = model_settings(settings)
    return chat_model(resolved, environ) if resolved.model_configured(environ) else None


def require_summary_model(
    settings: Settings, environ: Mapping[str, str] | None, purpose: str = "compaction"
) -> ChatModel:
    """The model of summaries and compaction (`summaryModel`) with `purpose`'s cap, or a UserError."""
    return configured_model(purpose_settings(settings, purpose), environ)


def optional_summary_model(
    settings: Settings, environ: Mapping[str, str] | None, purpose: str = "commitSummary"
) -> ChatModel | None:
    """The model of summaries (`summaryModel`) with `purpose`'s cap, or None when none is configured."""
    resolved = purpose_settings(settings, purpose)
    return chat_model(resolved, environ) if resolved.model_configured(environ) else None


def configured_model(resolved: Settings, environ: Mapping[str, str] | None) -> ChatModel:
    """The model of already resolved settings (`model_settings`), or a UserError saying what to set."""
    check_configured(resolved, environ)
    return chat_model(resolved, environ)


def check_configured(resolved: Settings, environ: Mapping[str, str] | None) -> None:
    if not resolved.model_configured(environ):
        from nagent_lsp.llm.openai_chat import not_configured_message

        raise UserError(not_configured_message(resolved.apiKeyEnv))
