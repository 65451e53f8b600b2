"""One typed settings model (DESIGN §4), merged from layered sources; pure, no editor or disk access here.

Sources, later wins: defaults < environment < ~/.nagent/config.json < <repo>/.nagent/config.json
< initializationOptions < workspace/configuration. A value of None or "" in a source means "not set",
so an editor that sends every key with empty defaults does not wipe out a config file.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

DEFAULT_DENY_READ = (".env", ".env.*", "*.pem", "*.key", "id_rsa*")
SHELL_MODES = ("allow", "ask", "deny")


@dataclass(frozen=True)
class HistorySettings:
    maxCommits: int = 200
    maxChangesetFiles: int = 50
    summarize: bool = True


@dataclass(frozen=True)
class Settings:
    model: str = "gpt-4.1-mini"
    baseUrl: str | None = None
    apiKeyEnv: str = "OPENAI_API_KEY"
    temperature: float = 0.2
    maxOutputTokens: int = 8192
    requestTimeout: float = 120.0
    maxSteps: int = 25
    shell: str = "ask"
    shellTimeout: float = 120.0
    denyRead: tuple[str, ...] = DEFAULT_DENY_READ
    confirmEdits: bool = False
    stateRoot: str | None = None
    history: HistorySettings = field(default_factory=HistorySettings)

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        env = os.environ if environ is None else environ
        return env.get(self.apiKeyEnv) or None

    def model_configured(self, environ: Mapping[str, str] | None = None) -> bool:
        return bool(self.api_key(environ) or self.baseUrl)

    def public(self) -> dict[str, Any]:
        """Settings as JSON (camelCase, nested); holds the variable's name, never the key."""
        out = {k: getattr(self, k) for k in _TOP_KEYS}
        out["denyRead"] = list(self.denyRead)
        out["history"] = {k: getattr(self.history, k) for k in _HISTORY_KEYS}
        return out


_TOP_KEYS = [k for k in Settings.__dataclass_fields__ if k != "history"]
_HISTORY_KEYS = list(HistorySettings.__dataclass_fields__)


class SettingError(ValueError):
    def __init__(self, key: str, message: str):
        super().__init__(f"nagent setting '{key}': {message}")
        self.key = key


def _shown(value: Any) -> str:
    """A wrong value as an error message may show it: numbers and the like, never a string's text."""
    return f"a string of {len(value)} characters" if isinstance(value, str) else repr(value)


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _number(low: float, high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"expected a number, got {_shown(value)}")
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}, got {_shown(value)}")
        return float(value)

    return check


def _integer(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ValueError(f"expected a whole number, got {_shown(value)}")
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {_shown(value)}")
        return value

    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_shown(value)}")
    return value


def _shell(value: Any) -> str:
    if value not in SHELL_MODES:
        # Never echo a string setting's value: people paste secrets into the wrong box.
        raise ValueError(f"expected one of {', '.join(SHELL_MODES)}")
    return value


def _globs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of glob strings")
    return tuple(value)


def _env_name(value: Any) -> str:
    value = _string(value)
    if not value or not all(c.isalnum() or c == "_" for c in value):
        raise ValueError("expected the NAME of an environment variable (such as OPENAI_API_KEY), not its value")
    return value


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "model": _string,
    "baseUrl": _string,
    "apiKeyEnv": _env_name,
    "temperature": _number(0.0, 2.0),
    "maxOutputTokens": _integer(1, 1_000_000),
    "requestTimeout": _number(1.0, 3600.0),
    "maxSteps": _integer(1, 1000),
    "shell": _shell,
    "shellTimeout": _number(1.0, 86400.0),
    "denyRead": _globs,
    "confirmEdits": _boolean,
    "stateRoot": _string,
    "history.maxCommits": _integer(1, 100_000),
    "history.maxChangesetFiles": _integer(1, 100_000),
    "history.summarize": _boolean,
}
KEYS = tuple(_VALIDATORS)


@dataclass(frozen=True)
class Source:
    name: str  # "defaults", "environment", "user", "repository", "initializationOptions", "workspace/configuration"
    values: Mapping[str, Any]
    origin: str = ""  # a file path or a protocol message, for error messages


@dataclass(frozen=True)
class Resolved:
    settings: Settings
    sources: tuple[str, ...]
    problems: tuple[SettingError, ...]


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested JSON ({"history": {"maxCommits": 5}}) and dotted keys ({"history.maxCommits": 5}) both work."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name == "history":
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def environment_source(environ: Mapping[str, str] | None = None) -> Source:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if env.get("OPENAI_BASE_URL"):
        values["baseUrl"] = env["OPENAI_BASE_URL"]
    if env.get("NAGENT_MODEL"):
        values["model"] = env["NAGENT_MODEL"]
    return Source("environment", values, "environment")


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


def merge(sources: list[Source]) -> Resolved:
    chosen: dict[str, Any] = {}
    problems: list[SettingError] = []
    used: list[str] = []
    for source in sources:
        used.append(source.name)
        for key, value in flatten(source.values).items():
            if value is None or value == "":
                continue
            validator = _VALIDATORS.get(key)
            if validator is None:
                problems.append(SettingError(key, f"unknown setting (in {source.origin or source.name})"))
                continue
            try:
                chosen[key] = validator(value)
            except ValueError as exc:
                problems.append(SettingError(key, f"{exc} (in {source.origin or source.name}); keeping the previous value"))
    top = {k: v for k, v in chosen.items() if "." not in k}
    hist = {k.split(".", 1)[1]: v for k, v in chosen.items() if k.startswith("history.")}
    settings = replace(Settings(), **top, history=replace(HistorySettings(), **hist))
    return Resolved(settings, tuple(used), tuple(problems))


def user_config_path() -> Path:
    return Path(os.path.expanduser("~")) / ".nagent" / "config.json"


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
        if path is None:
            continue
        source, problem = read_config_file(name, path)
        if source:
            sources.append(source)
        if problem:
            file_problems.append(problem)
    if init_options:
        sources.append(Source("initializationOptions", _unwrap(init_options), "initializationOptions"))
    if workspace_config:
        sources.append(Source("workspace/configuration", workspace_config, "workspace/configuration"))
    resolved = merge(sources)
    return replace(resolved, problems=tuple(file_problems) + resolved.problems)


def _unwrap(options: Mapping[str, Any]) -> Mapping[str, Any]:
    # Clients may send {"nagent": {...}} or {"settings": {...}} (the VS Code template shape); accept both.
    for key in ("nagent", "settings"):
        inner = options.get(key)
        if isinstance(inner, Mapping) and len(options) == 1:
            return inner
    return options
