"""`git blame --porcelain` output -> the commit that last changed each line; `.git-blame-ignore-revs` parsing."""

from __future__ import annotations

import re

_HEADER = re.compile(rb"^([0-9a-f]{40}) (\d+) (\d+)(?: \d+)?$")


def parse_porcelain(data: bytes) -> list[str]:
    """Commit hash per final line, index 0 = line 1."""
    lines: dict[int, str] = {}
    for raw in data.split(b"\n"):
        if not raw or raw[:1] == b"\t":
            continue
        match = _HEADER.match(raw)
        if match:
            lines[int(match.group(3))] = match.group(1).decode("ascii")
    if not lines:
        return []
    size = max(lines)
    return [lines.get(i, "") for i in range(1, size + 1)]


def parse_ignore_revs(text: str) -> frozenset[str]:
    """Hashes from a `.git-blame-ignore-revs` file (comments after #, blank lines ignored, lower-cased)."""
    out = set()
    for line in text.splitlines():
        token = line.split("#", 1)[0].strip().lower()
        if token and re.fullmatch(r"[0-9a-f]{7,40}", token):
            out.add(token)
    return frozenset(out)


def is_ignored(sha: str, revs: frozenset[str]) -> bool:
    if not revs:
        return False
    if sha in revs:
        return True
    # abbreviated entries (rare) match by prefix
    return any(len(r) < 40 and sha.startswith(r) for r in revs)
