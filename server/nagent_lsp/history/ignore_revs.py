"""`.git-blame-ignore-revs`: the commits a repository asks blame (and nagent's co-edit counts) to look through.

Its own small module (no dataclasses, no array): the CLI's cold `history` reads it without the blame machinery."""

from __future__ import annotations

import re
from pathlib import Path

FILE_NAME = ".git-blame-ignore-revs"
_HASH = re.compile(r"[0-9a-f]{7,40}")


def parse_ignore_revs(text: str) -> frozenset[str]:
    """Hashes from a `.git-blame-ignore-revs` file (comments after #, blank lines ignored, lower-cased)."""
    out = set()
    for line in text.splitlines():
        token = line.split("#", 1)[0].strip().lower()
        if token and _HASH.fullmatch(token):
            out.add(token)
    return frozenset(out)


def read_ignore_revs(root: Path) -> frozenset[str]:
    """The repository's list; none when the file is missing or unreadable."""
    try:
        return parse_ignore_revs((root / FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return frozenset()


def is_ignored(sha: str, revs: frozenset[str]) -> bool:
    if not revs:
        return False
    if sha in revs:
        return True
    # abbreviated entries (rare) match by prefix
    return any(len(r) < 40 and sha.startswith(r) for r in revs)
