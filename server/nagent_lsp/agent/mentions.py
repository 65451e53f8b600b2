"""`@path` mentions in a request (issue 25, "context by hand"): `@src/calc.py`, or quoted `@"docs/a b.md"` for a
name with spaces, names a workspace-relative file to include. Each is read through the run's read rules (the
workspace folders, denyRead, regular files, the size limit, the agent's read permission) exactly as a model's
`<nagent-read>` would be, and recorded in the conversation as the same `<nagent-read-result>` block (a refusal
as its error), so the next request, and whoever reads the conversation, sees what was included.

What counts as a mention: `@` at the start or after a space or an opening bracket/quote (so `ann@example.com`
is none), then a quoted name or a run of non-space characters without trailing punctuation (`@a.py,` names
`a.py`). An unquoted word that names no file and does not look like a path (`@dataclass`, `@pytest.fixture`: no
`/`, no short extension) is not a mention at all, so decorators in a request cost nothing; one that looks like a
path and is missing is reported (`included: false`, `reason`), as is every refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import attrs

from nagent_lsp.agent.read import BufferReader, read_with
from nagent_lsp.agent.sandbox import ReadRules
from nagent_lsp.tags.results import render_result

_MENTION = re.compile(r"""(?:^|(?<=[\s(\[{"'`]))@(?:"(?P<quoted>[^"\n]+)"|(?P<bare>[^\s"'`]+))""")
_TRAILING = ".,;:!?)]}>'\"`"
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,4}$")
MAX_MENTIONS = 20  # a request naming more files than this is a paste, not a choice: the rest are reported


@attrs.frozen
class Mention:
    """One `@path` of a request as results list it: `included` false with the `reason` when it was not."""

    path: str
    included: bool
    reason: str | None = None


@attrs.frozen
class MentionRead:
    """The mentions of a request and the blocks that record them in the conversation (after the request)."""

    mentions: list[Mention]
    blocks: list[str]


def mentioned_paths(request: str) -> list[tuple[str, bool]]:
    """(path, quoted) for every mention, first occurrence first, each path once."""
    found: list[tuple[str, bool]] = []
    for match in _MENTION.finditer(request):
        quoted = match.group("quoted")
        path = quoted.strip() if quoted is not None else match.group("bare").rstrip(_TRAILING)
        if path and all(path != seen for seen, _ in found):
            found.append((path, quoted is not None))
    return found


def _looks_like_path(path: str) -> bool:
    return "/" in path or bool(_EXTENSION.search(path))


def read_mentions(request: str, rules: ReadRules, port: BufferReader, base: Path) -> MentionRead:
    """Read every mention of `request` (relative to `base`, the workspace folder) under `rules`."""
    mentions: list[Mention] = []
    blocks: list[str] = []
    for n, (path, quoted) in enumerate(mentioned_paths(request)):
        if n >= MAX_MENTIONS:
            mentions.append(Mention(path, False, f"more than {MAX_MENTIONS} files mentioned"))
            continue
        outcome = read_with(rules, path, port, base=base)
        missing = outcome.path is None or not outcome.path.exists()  # a resolved path is inside the workspace
        if not outcome.ok and not quoted and missing and not _looks_like_path(path):
            continue  # `@dataclass`: a word, not a file
        if outcome.ok:
            mentions.append(Mention(path, True))
            blocks.append(render_result("read", {"path": path, "mentioned": "true"}, outcome.text))
        else:
            reason = outcome.error or "not read"
            mentions.append(Mention(path, False, reason))
            blocks.append(render_result("read", {"path": path, "mentioned": "true", "error": reason}))
    return MentionRead(mentions, blocks)


def summary(mentions: Iterable[Mention]) -> str | None:
    """`2 mentioned files included` / `1 of 2 mentioned files included` for the run's message; None without any."""
    listed = list(mentions)
    if not listed:
        return None
    included = sum(m.included for m in listed)
    word = "file" if len(listed) == 1 else "files"
    if included == len(listed):
        return f"{included} mentioned {word} included"
    return f"{included} of {len(listed)} mentioned {word} included"
