"""Co-edit table: which other files changed in the same commits as a file, and how often.

Rules (DESIGN §6): over the file's most recent commits, count each other file once per shared commit; skip changesets
with more than `max_changeset_files` files (mass reformats and renames would couple everything with everything) and
commits listed in `.git-blame-ignore-revs`; the file's own former names are not partners. The skipped commits leave
the denominator too (as code-maat does), so a rate is "share of the file's meaningful commits".
rate = count / commits; high >= 50 %, medium >= 20 %, else low; top 20 by count, then path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import NamedTuple, TypeVar

HIGH = 0.5
MEDIUM = 0.2
TOP = 20

P = TypeVar("P", bound=Hashable)  # how a path is given: git's bytes (the index) or text


class CoeditRow:
    """One partner of a file. A plain class (a NamedTuple's `count` would hide tuple.count; a dataclass would cost
    the CLI's cold `history` the dataclasses import)."""

    __slots__ = ("path", "count", "rate", "level")

    def __init__(self, path: str, count: int, rate: float, level: str):
        self.path = path
        self.count = count
        self.rate = rate
        self.level = level

    def _key(self) -> tuple[str, int, float, str]:
        return (self.path, self.count, self.rate, self.level)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CoeditRow) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CoeditRow(path={self.path!r}, count={self.count!r}, rate={self.rate!r}, level={self.level!r})"

    @property
    def percent(self) -> int:
        return round(self.rate * 100)

    def as_dict(self) -> dict:
        return {"path": self.path, "count": self.count, "rate": round(self.rate, 4), "level": self.level}


class CoeditTable(NamedTuple):
    commits: int  # commits counted (after the changeset cap and ignore list)
    rows: tuple[CoeditRow, ...]
    skipped: int = 0  # commits left out by the cap or the ignore list


def level(rate: float) -> str:
    if rate >= HIGH:
        return "high"
    if rate >= MEDIUM:
        return "medium"
    return "low"


def coedit_table(
    changesets: Iterable[tuple[str, Iterable[P]]],
    own_names: Iterable[P],
    max_changeset_files: int,
    ignored: Callable[[str], bool] = lambda _h: False,
    keep: Callable[[P], bool] = lambda _p: True,
    limit: int = TOP,
    name: Callable[[P], str] = str,
) -> CoeditTable:
    """`changesets`: (commit hash, paths it changed under their current names), for the file's commits.
    `keep(path)` filters partners (e.g. files that no longer exist); `name(path)` is the text a row shows."""
    own = set(own_names)
    counts: Counter[P] = Counter()
    commits = 0
    skipped = 0
    for sha, paths in changesets:
        files = paths if isinstance(paths, (list, tuple, set, frozenset)) else list(paths)
        if len(files) > max_changeset_files or ignored(sha):
            skipped += 1
            continue
        commits += 1
        for path in set(files) - own:
            counts[path] += 1
    ranked: list[tuple[str, int]] = []
    for shown, c, p in sorted(((name(p), c, p) for p, c in counts.items()), key=lambda t: (-t[1], t[0])):
        if len(ranked) >= limit:
            break
        if keep(p):  # asked only of the rows that could be shown
            ranked.append((shown, c))
    denominator = max(1, commits)
    rows = tuple(CoeditRow(p, c, c / denominator, level(c / denominator)) for p, c in ranked)
    return CoeditTable(commits, rows, skipped)
