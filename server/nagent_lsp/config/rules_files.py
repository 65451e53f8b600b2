"""The team's rules files (AGENTS.md, CLAUDE.md, `.claude/rules`, Copilot instructions): which files each convention
names, their front matter, and whether a file's globs match a target. Pure: no disk access here (agent.rules_files
finds and reads the files through the read rules).

Front matter is the YAML between a first line `---` and the next `---` line. `.claude/rules/*.md` scope themselves
with `paths:` (a glob or a list of globs; none → always used), `.github/instructions/*.instructions.md` with
`applyTo:` (a comma-separated glob string or a list; none → never used automatically, as in Copilot). Globs are
matched on the target's path relative to the repository, `/`-separated: `*` and `?` stay within a folder, `**`
crosses folders (`**/` also matches no folder), `{a,b}` alternates, and a glob without `/` matches the file name at
any depth (as `.gitignore` does). Everything read from these files is text for the model, never settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

Convention = Literal["agentsMd", "claudeMd", "claudeRules", "copilot"]
# The setting names (rulesFiles.<name>) in the order their files are listed; see agent.rules_files for the order
# the blocks take in the initial context.
CONVENTIONS: tuple[Convention, ...] = ("agentsMd", "claudeMd", "claudeRules", "copilot")
FOLDER_FILES: dict[Convention, str] = {"agentsMd": "AGENTS.md", "claudeMd": "CLAUDE.md"}  # one per folder, nested
COPILOT_FILE = ".github/copilot-instructions.md"
CLAUDE_RULES_DIR = ".claude/rules"
COPILOT_INSTRUCTIONS_DIR = ".github/instructions"
COPILOT_SUFFIX = ".instructions.md"


class FrontMatterError(ValueError):
    """A front matter that cannot be read; the message says what is wrong (the caller names the file)."""


@dataclass(frozen=True)
class FrontMatter:
    """`globs` is None when the scoping key is absent (the file's convention decides), else the globs it lists."""

    globs: tuple[str, ...] | None
    body: str


def split_front_matter(text: str, key: str) -> FrontMatter:
    """The body after the front matter and the globs under `key` (`paths` or `applyTo`); `FrontMatterError` when a
    front matter is opened and never closed, is not YAML, is not a mapping, or `key` is not a string or list."""
    stripped = text.removeprefix("\ufeff")
    lines = stripped.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return FrontMatter(None, text)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n").rstrip() in ("---", "...")), None)
    if end is None:
        raise FrontMatterError("its front matter opens with '---' and never closes")
    meta = _yaml_mapping("".join(lines[1:end]))
    body = "".join(lines[end + 1 :])
    return FrontMatter(globs_of(meta.get(key), key), body)


def _yaml_mapping(text: str) -> dict[str, Any]:
    import yaml  # only repositories with scoped rules files pay for importing it

    try:
        data: Any = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 2}" if where is not None else ""
        raise FrontMatterError(f"its front matter is not valid YAML{line}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError("its front matter is not a mapping of keys to values")
    return data


def globs_of(value: object, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items: list[object] = list(value) if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise FrontMatterError(f"'{key}' must be a glob or a list of globs")
    globs: list[str] = []
    for item in items:
        globs.extend(g.strip() for g in _split_commas(str(item)) if g.strip())
    return tuple(globs)


def _split_commas(text: str) -> list[str]:
    """`a/*.ts, b/**` → two globs; a comma inside `{…}` belongs to the glob."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def matches_any(globs: Iterable[str], relative: str) -> str | None:
    """The first glob matching the repository-relative `relative` path (`/`-separated), else None."""
    for glob in globs:
        if any(pattern.fullmatch(relative) for pattern in _compiled(glob)):
            return glob
    return None


@lru_cache(maxsize=512)
def _compiled(glob: str) -> tuple[re.Pattern[str], ...]:
    cleaned = glob.strip().removeprefix("./").lstrip("/")
    patterns = []
    for alternative in _expand_braces(cleaned)[:64]:  # a bounded number of alternatives per glob
        if "/" not in alternative.rstrip("/"):
            alternative = "**/" + alternative  # a bare name matches at any depth
        patterns.append(re.compile(_translate(alternative)))
    return tuple(patterns)


def _expand_braces(glob: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", glob)
    if match is None:
        return [glob]
    head, tail = glob[: match.start()], glob[match.end() :]
    return [x for option in match.group(1).split(",") for x in _expand_braces(head + option + tail)]


def _translate(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and "]" in glob[i + 2 :]:
            close = glob.index("]", i + 2)
            inner = glob[i + 1 : close].replace("\\", "\\\\")
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner) + "]")
            i = close + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)
