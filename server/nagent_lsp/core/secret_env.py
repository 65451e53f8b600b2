"""The process's secrets: key-like environment variables, held in memory and out of `os.environ`.

At start-up (`headless/launch.py`) every key-like variable — `OPENAI_API_KEY`, whatever `apiKeyEnv` names in the
config files, and in general any name whose last part is KEY/TOKEN/SECRET/PASSWORD… — is moved here, and the
interpreter is re-executed without them, so `/proc/<server>/environ` never holds one. What reads "the environment"
for a key (settings, the model adapter, `nagent.status`) reads `process_environ()`, which sees them; what starts
a command the model wrote gets `command_environ()`, which never holds any of them.

Imports nothing of the project: config/, llm/ and agent/ all read it.
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Iterable, Mapping

# A name is key-like when one of its `_`-separated parts (case-insensitive) is one of these …
_SECRET_PARTS = frozenset({"APIKEY", "SECRET", "SECRETS", "TOKEN", "TOKENS", "PASSWORD", "PASSWD", "PASSPHRASE"})
# … or when it ends in one of these (KEY only as the last part: KEY_ID, KEYRING… are names, not keys) …
_SECRET_LAST = frozenset({"KEY", "PASS"})
# … or when it holds API followed by KEY (OPENAI_API_KEY_2).
# Start-up variables a process needs as they are; never treated as secrets even if a setting names one.
_NEVER = frozenset({"PATH", "HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR"})

_held: dict[str, str] = {}


def is_key_like(name: str) -> bool:
    upper = name.upper()
    if upper in _NEVER:
        return False
    parts = [p for p in upper.split("_") if p]
    if not parts:
        return False
    if parts[-1] in _SECRET_LAST or any(p in _SECRET_PARTS for p in parts):
        return True
    return any(a == "API" and b == "KEY" for a, b in zip(parts, parts[1:], strict=False))


def hideable(name: str) -> bool:
    """Whether `name` may be held as a secret at all (a setting naming PATH does not take PATH away)."""
    return bool(name) and name.upper() not in _NEVER and "=" not in name and "\0" not in name


def hold(values: Mapping[str, str]) -> None:
    """Keep these values as secrets (the start-up hand-over). They are not put into `os.environ`."""
    _held.update({k: v for k, v in values.items() if hideable(k)})


def claim(name: str) -> None:
    """A setting names `name` as holding the API key: from now on it is a secret too. Moves it out of
    `os.environ` when it is there, so no subprocess inherits it (the server's own /proc entry is covered by the
    shell's isolation, agent/shell.py)."""
    if not hideable(name):
        return
    value = os.environ.pop(name, None)
    if value is not None:
        _held[name] = value


def held_names() -> frozenset[str]:
    return frozenset(_held)


def held_values() -> tuple[str, ...]:
    """The secret values (for redaction, a second line of defence); never logged, never returned."""
    return tuple(v for v in _held.values() if v)


def process_environ() -> Mapping[str, str]:
    """The environment the user started the server with: `os.environ` plus the held secrets (a live view)."""
    return ChainMap(_held, os.environ)


def command_environ(base: Mapping[str, str] | None = None, hide: Iterable[str] = ()) -> dict[str, str]:
    """An environment for a command the model runs: `base` (default `os.environ`) without any key-like
    variable, any held secret's name, or the names in `hide` (the variable `apiKeyEnv` names)."""
    env = dict(os.environ if base is None else base)
    drop = set(hide) | set(_held)
    return {k: v for k, v in env.items() if k not in drop and not is_key_like(k)}
