"""One typed settings model (DESIGN §4), merged from layered sources; pure, no editor or disk access here.

Sources, later wins: defaults < environment < ~/.nagent/config.json < <repo>/.nagent/config.json
< initializationOptions < workspace/configuration. A value of None or "" in a source means "not set",
so an editor that sends every key with empty defaults does not wipe out a config file. The field names are
the contract's camelCase names; their types and Annotated checks are the validation (config.convert).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import attrs

from nagent_lsp.config.checks import UNKNOWN, Between, Check
from nagent_lsp.config.defaults import (
    DEFAULT_DENY_READ,
    DEFAULT_DENY_WRITE,
    DEFAULT_MAX_CHANGESET_FILES,
    DEFAULT_MAX_COMMITS,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_REVIEW_ALWAYS,
)
from nagent_lsp.config.state_root import user_config_path
from nagent_lsp.core.secret_env import process_environ

EnvName = Annotated[
    str,
    Check(
        lambda v: all(c.isalnum() or c == "_" for c in v),
        "expected the NAME of an environment variable (such as OPENAI_API_KEY), not its value",
    ),
]


@attrs.frozen
class HistorySettings:
    maxCommits: Annotated[int, Between(1, 100_000)] = DEFAULT_MAX_COMMITS
    maxChangesetFiles: Annotated[int, Between(1, 100_000)] = DEFAULT_MAX_CHANGESET_FILES
    summarize: bool = True
    shareSummaries: Literal["off", "notes"] = "off"  # DESIGN §11: "notes" shares commit summaries via git notes
    # Issue 25: commit diffs go to the summary model only with the user's consent, asked once per repository
    # (remembered in ~/.nagent); a loopback endpoint needs none. "always"/"never" decide without asking.
    summaryConsent: Literal["ask", "always", "never"] = "ask"
    # Issue 26: completeness hints ("usually changes with X; not touched") and recent-fix warnings on a change set.
    # minRate is the predictor's estimated chance (history.coupling); 0.45/2 from benchmarks/coupling.py on git/git.
    coupling: bool = True
    couplingMinRate: Annotated[float, Between(0.0, 1.0)] = 0.45
    couplingMinCommits: Annotated[int, Between(1, 100_000)] = 2
    recentFixDays: Annotated[int, Between(0, 36_500)] = 30  # a fix older than this warns no more; 0: never


@attrs.frozen
class ConversationSettings:
    tokenBudget: Annotated[int, Between(1000, 100_000_000)] = 60000  # DESIGN §11: memory is folded above this
    # Where a new conversation of a file in a repository is kept: "committed" (`.nagent/conversations/`, listed in
    # its manifest, travels with the repository) or "local" (`.nagent/conversations/local/`, ignored by git).
    share: Literal["committed", "local"] = "committed"


@attrs.frozen
class AttributionSettings:
    # issue 27: "ai" writes a Git AI v3.0.0 authorship log to refs/notes/ai for each new commit holding lines nagent
    # wrote (local until `nagent-lsp attribution push`); "off" writes none (the ledger and hover stay)
    notes: Literal["ai", "off"] = "ai"


@attrs.frozen
class RulesFilesSettings:
    """The team's rules files read into the initial context (agent.rules_files), one switch per convention. Yours
    to turn off; a repository's config may turn one off, never on (NARROW_ONLY)."""

    agentsMd: bool = True  # AGENTS.md, the repository root's and the nested ones down to the file's folder
    claudeMd: bool = True  # CLAUDE.md, the same way
    claudeRules: bool = True  # .claude/rules/*.md (front matter `paths:` scopes them)
    copilot: bool = True  # .github/copilot-instructions.md and .github/instructions/*.instructions.md (`applyTo`)


@attrs.frozen
class Price:
    """Currency units per million tokens (DESIGN §10)."""

    input: Annotated[float, Between(0, 1_000_000)]
    output: Annotated[float, Between(0, 1_000_000)]


@attrs.frozen
class ModelProfile:
    """A named model (DESIGN §10): unset fields fall back to the top-level settings."""

    model: str
    baseUrl: str | None = None
    apiKeyEnv: EnvName | None = None
    temperature: Annotated[float, Between(0, 2)] | None = None
    maxOutputTokens: Annotated[int, Between(1, 1_000_000)] | None = None
    price: Price | None = None


@attrs.frozen
class McpServerSetting:
    """One stdio MCP server of `mcpServers` (issue 24), the shape Claude, Zed and Cursor use: `command`, `args`, `env`
    (added to the server's environment). User config only: a repository naming one would run a command."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.Factory(dict)


ToolMode = Literal["allow", "ask", "deny"]


@attrs.frozen
class Settings:
    model: str = "gpt-4.1-mini"
    baseUrl: str | None = None
    apiKeyEnv: EnvName = "OPENAI_API_KEY"
    temperature: Annotated[float, Between(0, 2)] = 0.2
    maxOutputTokens: Annotated[int, Between(1, 1_000_000)] = 8192
    # Issue 23: requestTimeout is the silence allowed (seconds without a byte from the model server), requestDeadline
    # one request end to end; a slow model that keeps streaming is cut only by the deadline.
    requestTimeout: Annotated[float, Between(1, 3600)] = 120.0
    requestDeadline: Annotated[float, Between(1, 86400)] = 1800.0
    # Output caps per purpose (tokens of one reply), sized to what each produces; maxOutputTokens is the edits'.
    commitSummaryMaxTokens: Annotated[int, Between(16, 1_000_000)] = 1200  # one batch of up to 20 one-line summaries
    fileSummaryMaxTokens: Annotated[int, Between(16, 1_000_000)] = 400
    memoryMaxTokens: Annotated[int, Between(16, 1_000_000)] = 1500
    compactionMaxTokens: Annotated[int, Between(16, 1_000_000)] = 2000
    maxSteps: Annotated[int, Between(1, 1000)] = 25
    shell: Literal["allow", "ask", "deny"] = "ask"
    # Issue 24: MCP tool calls (`<nagent-tool>`), "SERVER/TOOL" glob -> allow/ask/deny; the strictest matching rule
    # wins and a name no rule matches is asked, so rules added by a repository (ask/deny only) can only narrow.
    tools: dict[str, ToolMode] = attrs.Factory(dict)
    mcpServers: dict[str, McpServerSetting] = attrs.Factory(dict)  # user config (~/.nagent/config.json) only
    shellTimeout: Annotated[float, Between(1, 86400)] = 120.0
    denyRead: tuple[str, ...] = DEFAULT_DENY_READ
    maxFileBytes: Annotated[int, Between(1, 1 << 40)] = DEFAULT_MAX_FILE_BYTES
    confirmEdits: bool = False
    stateRoot: str | None = None
    history: HistorySettings = attrs.Factory(HistorySettings)
    models: dict[str, ModelProfile] = attrs.Factory(dict)  # named profiles; `model`/`summaryModel` may name one
    summaryModel: str | None = None  # commit/file summaries and compaction; None: `model`
    writeScope: Literal["target", "workspace"] = "workspace"
    denyWrite: tuple[str, ...] = DEFAULT_DENY_WRITE
    reviewAlways: tuple[str, ...] = DEFAULT_REVIEW_ALWAYS
    conversation: ConversationSettings = attrs.Factory(ConversationSettings)
    rulesFiles: RulesFilesSettings = attrs.Factory(RulesFilesSettings)
    attribution: AttributionSettings = attrs.Factory(AttributionSettings)

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key from `environ`, by default the process's environment with its held secrets
        (core.secret_env: the key variables are not in `os.environ` once the server has started)."""
        env = process_environ() if environ is None else environ
        return env.get(self.apiKeyEnv) or None

    def model_configured(self, environ: Mapping[str, str] | None = None) -> bool:
        return bool(self.api_key(environ) or self.baseUrl)

    def public(self) -> dict[str, Any]:
        """Settings as JSON (camelCase, nested); holds the variable's name, never the key, and the names of an MCP
        server's environment variables, never their values (a token for the server often sits there)."""
        from nagent_lsp.config.convert import converter

        data: dict[str, Any] = converter.unstructure(self)
        for server in data.get("mcpServers", {}).values():
            server["env"] = dict.fromkeys(server.get("env") or {}, "[hidden]")
        return data


# The nested settings classes: their keys may also be written dotted ("history.maxCommits").
# (from the defaults, not the annotations: resolving Settings' string annotations here cost ~10 ms of every start)
GROUPS = {f.name for f in attrs.fields(Settings) if attrs.has(getattr(f.default, "factory", None) or object)}


class SettingError(ValueError):
    def __init__(self, key: str, message: str):
        super().__init__(f"nagent setting '{key}': {message}")
        self.key = key


@attrs.frozen
class Source:
    name: str  # "defaults", "environment", "user", "repository", "initializationOptions", "workspace/configuration"
    values: Mapping[str, Any]
    origin: str = ""  # a file path or a protocol message, for error messages


@attrs.frozen
class Resolved:
    settings: Settings
    sources: tuple[str, ...]
    problems: tuple[SettingError, ...]
    origins: Mapping[str, str] = attrs.Factory(dict)  # flat key -> the source its value came from (unset: defaults)


def flatten(values: Mapping[str, Any]) -> dict[str, Any]:
    """Nested JSON ({"history": {"maxCommits": 5}}) and dotted keys ({"history.maxCommits": 5}) both work."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, Mapping):
            flat.update((f"{key}.{k}", v) for k, v in value.items())
        else:
            flat[key] = value
    return flat


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        group, dot, name = key.partition(".")
        if dot and group in GROUPS:
            nested.setdefault(group, {})[name] = value
        else:
            nested[key] = value
    return nested


# DESIGN §10/§12 trust: a repository's own config file (`<repo>/.nagent/config.json`, which a cloned repository
# brings along) may only narrow: safer, cheaper, more review — never the other way. Each refused value is one
# problem naming its key, and the value before it is kept.
# Ordered from narrowest to widest: a repository may move a setting left, never right.
NARROW_ONLY: dict[str, tuple[Any, ...]] = {
    "shell": ("deny", "ask", "allow"),
    "writeScope": ("target", "workspace"),
    "confirmEdits": (True, False),  # it may ask for review, never turn the user's review off
    "history.summarize": (False, True),  # summaries are model calls: the user's money
    "history.shareSummaries": ("off", "notes"),  # sharing pushes to the team's remote: the user's consent
    "history.summaryConsent": ("never", "ask", "always"),  # whose diffs leave the machine: the user's consent
    # the team's rules files cost tokens on every request: a repository may drop a convention, not add one back
    "rulesFiles.agentsMd": (False, True),
    "rulesFiles.claudeMd": (False, True),
    "rulesFiles.claudeRules": (False, True),
    "rulesFiles.copilot": (False, True),
    "conversation.share": ("local", "committed"),  # what the user's conversations offer to commit: their consent
    "attribution.notes": ("off", "ai"),  # notes are written into the user's repository: their consent
}
# Limits and budgets a repository may only lower (raising them is how it would bloat or stall the server).
LOWER_ONLY = (
    "maxFileBytes",
    "requestTimeout",
    "requestDeadline",
    "commitSummaryMaxTokens",
    "fileSummaryMaxTokens",
    "memoryMaxTokens",
    "compactionMaxTokens",
    "shellTimeout",
    "maxSteps",
    "maxOutputTokens",
    "history.maxCommits",
    "history.maxChangesetFiles",
    "conversation.tokenBudget",
)
# Its deny and review lists add to the ones before it instead of replacing them (an empty `denyRead` must not
# expose `.env`).
ADD_ONLY = ("denyRead", "denyWrite", "reviewAlways")
# Which model runs is what the user pays for: a repository may pick one of the user's own profiles, nothing else.
PROFILE_ONLY = ("model", "summaryModel")
UNTRUSTED_SOURCES = ("repository",)
# Where the API key goes and where files are written are the user's choice alone: a cloned repository naming an
# endpoint would receive the key, and one naming a state root would make the server write wherever it likes.
TRUSTED_ONLY = ("baseUrl", "apiKeyEnv", "stateRoot")
ENDPOINT_FIELDS = ("baseUrl", "apiKeyEnv")
# Settings that run a program: only the user's own config file (~/.nagent/config.json) may set them. Not the
# editor's workspace settings either: those can come from a file in the repository (.vscode/settings.json).
USER_CONFIG_ONLY = ("mcpServers",)
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


def _narrowed_tools(value: Mapping[str, Any], before: Mapping[str, Any], where: str) -> tuple[Any, SettingError | None]:
    """A repository's `tools` rules added to the user's: ask/deny only (the strictest rule wins, so these can only
    narrow); an `allow` would widen a name no rule of the user's matches, and is refused."""
    merged = dict(before)
    refused = sorted(g for g, m in value.items() if m == "allow")
    for glob, mode in value.items():
        if mode in ("ask", "deny") and _STRICTNESS[mode] >= _STRICTNESS.get(merged.get(glob, "allow"), 0):
            merged[glob] = mode
        elif mode not in _STRICTNESS:
            merged[glob] = mode  # the converter names the bad value
    if refused:
        message = f"a repository's config cannot allow MCP tools ({', '.join(refused)}, in {where}); ignored"
        return merged, SettingError("tools", message)
    return merged, None


def _default(key: str) -> Any:
    group, dot, name = key.partition(".")
    value: Any = Settings()
    for part in (group, name) if dot else (key,):
        value = getattr(value, part, None)
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _narrowed(
    key: str, value: Any, chosen: Mapping[str, Any], where: str, user_profiles: Collection[str]
) -> tuple[Any, SettingError | None]:
    """`value` of an untrusted source, kept within what the sources before it allow."""
    if key in TRUSTED_ONLY:
        message = f"a repository's config cannot set '{key}' (in {where}); set it in your user config or editor"
        return None, SettingError(key, message)
    before = chosen.get(key, _default(key))
    if key == "tools" and isinstance(value, Mapping):
        return _narrowed_tools(value, before or {}, where)
    if key == "models" and isinstance(value, Mapping):
        kept = {n: p for n, p in value.items() if not (isinstance(p, Mapping) and any(f in p for f in ENDPOINT_FIELDS))}
        if len(kept) < len(value):
            names = ", ".join(sorted(set(value) - set(kept)))
            message = f"a repository's config cannot give a model profile an endpoint or key ({names}, in {where})"
            return kept, SettingError(key, message)
    elif key in PROFILE_ONLY and isinstance(value, str):
        if value not in user_profiles:
            shown = ", ".join(sorted(user_profiles)) or "none defined"
            message = (
                f"a repository's config may only choose one of your own model profiles for '{key}' (in {where}; "
                f"your profiles: {shown}); ignored"
            )
            return None, SettingError(key, message)
    elif key in NARROW_ONLY:
        order = NARROW_ONLY[key]
        if value in order and before in order and order.index(value) > order.index(before):
            change = f"turn {'on' if value else 'off'}" if isinstance(value, bool) else f"widen to {value!r}"
            message = f"a repository's config cannot {change} '{key}' (in {where}); keeping {before!r}"
            return None, SettingError(key, message)
    elif key in LOWER_ONLY and _number(value) and _number(before) and value > before:
        message = (
            f"a repository's config may only lower '{key}', not raise it to {value!r} (in {where}); keeping {before!r}"
        )
        return None, SettingError(key, message)
    elif key in ADD_ONLY and isinstance(value, (list, tuple)):
        earlier = list(before)
        return earlier + [v for v in value if v not in earlier], None
    return value, None


def merge(sources: list[Source]) -> Resolved:
    """Each value is checked on its own: a refused one is reported, naming its key, and the one before it kept."""
    if not any(source.values for source in sources):
        # the defaults alone: nothing to check, and no cattrs (its import and generated structure code are
        # ~60 ms of a CLI command's or the server's start)
        return Resolved(Settings(), tuple(s.name for s in sources), (), {})
    return _merge_checked(sources)


def _merge_checked(sources: list[Source]) -> Resolved:
    chosen: dict[str, Any] = {}
    origins: dict[str, str] = {}
    found: list[SettingError] = []
    import cattrs

    from nagent_lsp.config.convert import converter, problems

    for source in sources:
        where = source.origin or source.name
        label = source.name if where == source.name else f"{source.name} ({where})"
        user_profiles = set(chosen.get("models") or {})  # defined by the sources before this one
        for key, value in flatten(source.values).items():
            if value is None or value == "" or (key in ("tools", *USER_CONFIG_ONLY) and value == {}):
                continue  # an editor sending its empty default wipes nothing, and is no attempt to set it
            if key in USER_CONFIG_ONLY and source.name not in ("user", "defaults"):
                message = f"'{key}' is read from your user config (~/.nagent/config.json) only, not {label}; ignored"
                found.append(SettingError(key, message))
                continue
            if source.name in UNTRUSTED_SOURCES:
                value, refused = _narrowed(key, value, chosen, where, user_profiles)
                found += [refused] if refused else []
                if value is None:
                    continue
            try:
                converter.structure(nest({key: value}), Settings)
            except cattrs.BaseValidationError as exc:
                for field, message in problems(exc):  # a nested value (models.NAME.price) is named in full
                    if message == UNKNOWN:
                        found.append(SettingError(field or key, f"unknown setting (in {where})"))
                    else:
                        found.append(SettingError(field or key, f"{message} (in {where}); keeping the previous value"))
            else:
                if key == "models" and isinstance(chosen.get(key), Mapping):
                    value = {**chosen[key], **value}  # profiles from several sources add up; a later one wins by name
                chosen[key] = value
                origins[key] = label
    settings = converter.structure(nest(chosen), Settings)
    return Resolved(settings, tuple(s.name for s in sources), tuple(found), origins)


def environment_source(environ: Mapping[str, str] | None = None) -> Source:
    env = process_environ() if environ is None else environ
    values = {"baseUrl": env.get("OPENAI_BASE_URL"), "model": env.get("NAGENT_MODEL")}
    return Source("environment", {k: v for k, v in values.items() if v}, "environment")


def read_config_file(name: str, path: Path) -> tuple[Source | None, SettingError | None]:
    """A missing file is no source; an unreadable or non-object file is one reported problem."""
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, SettingError(str(path), f"cannot read config file: {exc}")
    if not isinstance(data, dict):
        return None, SettingError(str(path), "config file must hold a JSON object")
    return Source(name, data, str(path)), None


def load_settings(
    repo_config: Path | None = None,
    init_options: Mapping[str, Any] | None = None,
    workspace_config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Collect every source in precedence order and merge them."""
    sources = [Source("defaults", {})]
    env = environment_source(environ)
    if env.values:
        sources.append(env)
    file_problems: list[SettingError] = []
    for name, path in (("user", user_config_path()), ("repository", repo_config)):
        source, problem = read_config_file(name, path) if path is not None else (None, None)
        sources += [source] if source else []
        file_problems += [problem] if problem else []
    if init_options:
        sources.append(Source("initializationOptions", _unwrap(init_options), "initializationOptions"))
    if workspace_config:
        sources.append(Source("workspace/configuration", workspace_config, "workspace/configuration"))
    resolved = merge(sources)
    return attrs.evolve(resolved, problems=tuple(file_problems) + resolved.problems)


def _unwrap(options: Mapping[str, Any]) -> Mapping[str, Any]:
    # Clients may send {"nagent": {...}} or {"settings": {...}} (the VS Code template shape); accept both.
    for key in ("nagent", "settings"):
        inner = options.get(key)
        if isinstance(inner, Mapping) and len(options) == 1:
            return inner
    return options
