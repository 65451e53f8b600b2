"""Secrets in text: what must not travel in a conversation that git shares (issue 28, "Sharing safely").

Found: token shapes the providers publish (`sk-…`, `ghp_…`, `AKIA…`, `xox?-…`, `AIza…`), private key blocks,
`NAME=value` / `"name": "value"` assignments whose NAME is key-like (the same rule as the shell environment filter,
core/secret_env.is_key_like), the secret values this process holds, and lines of `denyRead` files (`.env`, `*.pem`
…) that appear verbatim. A finding names its kind and line, never its text; `redact` replaces each with
`[redacted: <kind>]`, which no rule finds again (a second pass finds nothing).

Pure: the held values and the denyRead contents are arguments; the caller reads the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import attrs

from nagent_lsp.core.secret_env import is_key_like

MIN_HELD = 6  # a held value shorter than this is not searched for (it would redact ordinary words)
MIN_DENIED = 8  # nor a denyRead line or value shorter than this
MAX_DENIED = 400  # denyRead strings searched for, at most (each is a substring search over the text)
MAX_DENIED_CHARS = 4096  # a longer line is searched for by its first MAX_DENIED_CHARS characters

# Base64, PEM headers, and `\n` escapes (a key quoted in a JSON string): what a private key block's body holds.
_PEM_CHARS = r"A-Za-z0-9+/=\s:,.\\\-"
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            rf"-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY-----[{_PEM_CHARS}]*?"
            rf"(?:-----END ([A-Z0-9]+ )*PRIVATE KEY-----|(?=[^{_PEM_CHARS}])|\Z)"
        ),
    ),
    # Each pattern starts with its literal and checks the character before it in a lookbehind placed after the
    # literal: a leading lookbehind would make the regex engine try every position of the text (70 ms for a 280 KB
    # reply), a leading literal lets it skip to the candidates (issue 29).
    ("openai key", re.compile(r"sk-(?<![A-Za-z0-9_-]sk-)(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}")),
    ("github token", re.compile(r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})")),
    ("aws key", re.compile(r"A(?<![A-Z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("slack token", re.compile(r"xox(?<![A-Za-z0-9]xox)[abprs]-[A-Za-z0-9-]{10,}")),
    ("google key", re.compile(r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}")),
)
# NAME = value, NAME: value, "name": "value", export NAME='value'. The value: no space, quote or bracket (so a
# `[redacted: …]` marker is never a value again), at least 8 characters.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-/\\])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,100})[\"']?[ \t]*(?::=|=|:)[ \t]*(?P<quote>[\"'`]?)"
    r"(?P<value>[^\s\"'`,;()\[\]{}<>]{8,})"
)
# What every assignment holds: an operator followed by a value of 8 characters. An assignment never spans lines
# (no pattern part takes a line break), so only the lines where this occurs are searched with _ASSIGNMENT: the
# same matches as searching the whole text, without trying its lookbehind and name at every position. One pattern
# per operator: a leading literal is searched for at C speed, a leading [:=] is tried at every character (2.8 ms
# instead of 0.7 ms on a 280 KB reply, issue 29).
_OPERATOR_VALUES = tuple(re.compile(op + r"[ \t]*[\"'`]?[^\s\"'`,;()\[\]{}<>]{8}") for op in (":", "="))
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@attrs.frozen
class Finding:
    kind: str  # "openai key", "key assignment", "held secret", "denyRead content", …
    line: int  # 1-based line of its first character
    start: int  # offsets into the text: text[start:end] is the secret (never shown)
    end: int


def denied_strings(contents: Iterable[str]) -> tuple[str, ...]:
    """The strings of denyRead files worth searching for: each line (stripped, not a comment) and, for a
    `NAME=value` line, the value alone (a model quoting only the value). Short ones and duplicates are dropped,
    and at most MAX_DENIED are kept (longest first: a line before the value it holds)."""
    found: set[str] = set()
    for content in contents:
        for raw in content.splitlines():
            line = raw.strip()[:MAX_DENIED_CHARS]
            if len(line) < MIN_DENIED or line.startswith(("#", "//", ";")) or line.startswith("-----"):
                continue
            found.add(line)
            name, sep, value = line.partition("=")
            value = value.strip().strip("\"'")
            if sep and name.strip() and len(value) >= MIN_DENIED:
                found.add(value)
    return tuple(sorted(found, key=lambda s: (-len(s), s))[:MAX_DENIED])


def find_secrets(text: str, held: Iterable[str] = (), denied: Iterable[str] = ()) -> list[Finding]:
    """The secrets in `text`, in order, not overlapping (of two that overlap the earlier, then the longer, wins).
    `held`: secret values (core/secret_env.held_values(), the API key); `denied`: `denied_strings(...)`."""
    spans: list[tuple[int, int, str]] = []
    for kind, pattern in _TOKENS:
        spans.extend((m.start(), m.end(), kind) for m in pattern.finditer(text))
    for match in _assignments(text):
        if _secret_assignment(match):
            spans.append((match.start("value"), match.end("value"), "key assignment"))
    spans.extend(_occurrences(text, (v for v in held if len(v) >= MIN_HELD), "held secret"))
    spans.extend(_occurrences(text, (d for d in denied if len(d) >= MIN_DENIED), "denyRead content"))
    spans.sort(key=lambda s: (s[0], -s[1]))
    findings: list[Finding] = []
    end = -1
    line, counted = 1, 0
    for start, stop, kind in spans:
        if start < end:
            continue
        line += text.count("\n", counted, start)
        counted = start
        findings.append(Finding(kind, line, start, stop))
        end = stop
    return findings


def redact(text: str, findings: Iterable[Finding]) -> str:
    """`text` with each finding replaced by `[redacted: <kind>]` (findings as `find_secrets` returns them)."""
    out: list[str] = []
    at = 0
    for finding in findings:
        out.append(text[at : finding.start])
        out.append(f"[redacted: {finding.kind}]")
        at = finding.end
    out.append(text[at:])
    return "".join(out)


def redact_secrets(text: str, held: Iterable[str] = (), denied: Iterable[str] = ()) -> tuple[str, list[Finding]]:
    findings = find_secrets(text, held, denied)
    return (redact(text, findings) if findings else text), findings


def _assignments(text: str) -> Iterator[re.Match[str]]:
    """`_ASSIGNMENT.finditer(text)`, searched only in the lines that hold an operator and a value."""
    searched_to = 0
    for at in sorted(m.start() for pattern in _OPERATOR_VALUES for m in pattern.finditer(text)):
        if at < searched_to:
            continue  # its line was searched already
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        yield from _ASSIGNMENT.finditer(text, start, end)
        searched_to = end


def _secret_assignment(match: re.Match[str]) -> bool:
    name = match.group("name").rsplit(".", 1)[-1].replace("-", "_")
    if not is_key_like(_CAMEL.sub("_", name)):
        return False
    value = match.group("value")
    if len(set(value)) < 4 or value.startswith(("$", "%", "&", "*", "@", "!", "~")):
        return False  # a placeholder (xxxxxxxx), a reference ($TOKEN, %KEY%), an anchor
    if _ENV_NAME.fullmatch(value):
        return False  # the name of a variable (`apiKeyEnv: "OPENAI_API_KEY"`), not its value
    digit = any(c.isdigit() for c in value)
    # Unquoted, a value is code (`API_KEY = settings.api_key`) unless it holds a digit: literals are quoted.
    if not (match.group("quote") or digit):
        return False
    # A word (`token_type: "bearer_token"`) is not a secret; a digit or mixed case make one likely.
    return digit or (value.lower() != value and value.upper() != value)


def _occurrences(text: str, needles: Iterable[str], kind: str) -> list[tuple[int, int, str]]:
    spans = []
    for needle in dict.fromkeys(needles):
        at = text.find(needle)
        while at >= 0:
            spans.append((at, at + len(needle), kind))
            at = text.find(needle, at + len(needle))
    return spans
