"""`nagent.status`: what the server is running with (never the API key itself)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from nagent_lsp import __version__
from nagent_lsp.config.convert import WIRE_NULL
from nagent_lsp.config.settings import flatten
from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.llm.models import PurposeModel, model_settings, purpose_models, summary_settings
from nagent_lsp.llm.openai_chat import strip_userinfo
from nagent_lsp.operations.context_info import ContextLayer, context_layers
from nagent_lsp.operations.profiles import profile_names
from nagent_lsp.operations.session import Session

NULL = {WIRE_NULL: True}  # on the wire as null, never left out


@attrs.frozen
class HistoryStatus:
    """The history index of the workspace's repository: `state` is idle (nothing asked yet, or not a repository),
    building, ready or failed; `commits` read so far; `error` when it failed."""

    state: str
    commits: int | None = None
    error: str | None = None


@attrs.frozen
class ServerStatus:
    """The `nagent.status` result. `model`/`baseUrl` are what an edit really uses (a profile resolved;
    `modelProfile` names it, else null). `settings` is the settings' own JSON (`Settings.public()`: camelCase,
    nested, the key's variable name and never the key), `baseUrl` there without user info. `contextLayers`: the
    workspace's initial-context layers with their source (root context, then the repository's rules files that
    `rulesFiles` leaves on; every scoped one with its globs; nested AGENTS.md/CLAUDE.md are per file: `nagent-lsp
    context FILE`), `contextProblems` the rules files skipped and why."""

    version: str
    stateRoot: str
    model: str
    modelProfile: str | None = attrs.field(metadata=NULL)
    summaryModel: str
    baseUrl: str | None = attrs.field(metadata=NULL)
    modelConfigured: bool
    apiKeyEnv: str
    configSources: list[str]
    settingSources: dict[str, str]
    workspaceFolders: list[str]
    settings: dict[str, object]
    history: HistoryStatus
    contextLayers: list[ContextLayer]
    contextProblems: list[str]
    profiles: list[str]  # the user's model profiles (`models`), for a per-request `profile`
    purposes: list[PurposeModel]  # each purpose's model and output cap (issue 23): edit, summaries, memory, compaction


def status(session: Session) -> ServerStatus:
    s = session.settings
    used = model_settings(s)  # `model` may name a profile: report what a request will really use
    folders = session.workspace_folders
    context = context_layers(session, Path(folders[0]), all_scoped=True) if folders else None
    return ServerStatus(
        version=__version__,
        stateRoot=str(session.state_root().path),
        model=used.model,
        modelProfile=s.model if s.model in s.models else None,
        summaryModel=summary_settings(s).model,
        baseUrl=strip_userinfo(used.baseUrl) if used.baseUrl else None,
        modelConfigured=used.model_configured(session.environ),
        apiKeyEnv=used.apiKeyEnv,
        configSources=list(session.config_sources),
        settingSources=setting_sources(session),
        workspaceFolders=[str(p) for p in session.workspace_folders],
        settings={**s.public(), "baseUrl": strip_userinfo(s.baseUrl) if s.baseUrl else None},
        history=history_status(session),
        contextLayers=context.layers if context else [],
        contextProblems=context.problems if context else [],
        profiles=profile_names(s),
        purposes=purpose_models(s),
    )


def setting_sources(session: Session) -> dict[str, str]:
    """Where each effective value came from: `defaults`, or the source that set it (`user (~/.nagent/config.json)`,
    `repository (<repo>/.nagent/config.json)`, …) — so a user sees what a repository's config changed."""
    return {key: session.setting_origins.get(key, "defaults") for key in flatten(session.settings.public())}


def history_status(session: Session) -> HistoryStatus:
    """The state of the history index of the workspace's repository (its first folder's).
    "idle": nothing has asked for history there yet (or the folder is not in a repository); a status request never
    starts a build."""
    folders = session.workspace_folders
    top = git_toplevel(str(folders[0])) if folders else None
    service = session.history_service_of(Path(os.path.realpath(top))) if top else None
    if service is None:
        return HistoryStatus("idle")
    known = service.status()
    commits, error = known.get("commits"), known.get("error")
    return HistoryStatus(
        str(known["state"]),
        commits if isinstance(commits, int) else None,
        error if isinstance(error, str) else None,
    )
