"""A file's newest commits straight from git, before any repository index exists, and the view made of them.

The server's first hover (history/file_history.py, which caches pages and runs them in its pool) and the CLI's cold
`nagent-lsp history FILE` (headless/history_cold.py) both answer from here, so they cannot disagree. Kept light on
purpose (issue 29): no dataclasses, no logging, no thread pool at import; the CLI's cold answer is measured against
`nagent-lsp --version` plus one `git log`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from nagent_lsp.core.log_setup import info
from nagent_lsp.history.coedits import TOP, coedit_table
from nagent_lsp.history.encoding import display, git_arg
from nagent_lsp.history.git import GitError
from nagent_lsp.history.ignore_revs import is_ignored
from nagent_lsp.history.index import CommitRef, Lineage, RepoIndex, View
from nagent_lsp.history.logparse import RawCommit
from nagent_lsp.history.render import HistoryView

MAX_FALLBACK_HOPS = 8  # renames followed by per-file queries before the index exists
PROBLEM_CHARS = 300  # of git's error, on one line, in a hover card or an error message

Parse = Callable[[Iterable[bytes]], list[RawCommit]]


class LogSource(Protocol):
    """Where the page's `git log` output comes from: a GitRepository, or the CLI's early read of its first query
    (headless/history_cold.py)."""

    def log_paths(self, paths: Iterable[str], limit: int, revision: str = "HEAD") -> Iterable[bytes]: ...


class FirstPage(NamedTuple):
    repo_index: RepoIndex  # the page's commits alone
    lineage: Lineage
    # The page's co-edited paths that exist in the work tree: a page holds only the file's own commits, so a co-edited
    # file renamed in a commit outside them would show under both names; its old name is left out instead.
    alive: frozenset[bytes] | None = None
    queries: int = 0  # git processes it took (one per name the file had)
    # git's error when its first query failed, so nothing is known (a HEAD naming a missing commit, a broken
    # repository): the answer says so rather than "no commits yet". Empty otherwise.
    problem: str = ""


def read_first_page(git: LogSource, root: Path, raw: bytes, head: str, size: int, parse: Parse) -> FirstPage:
    """The newest `size` commits of the file `raw` at `head`: one `git log` per name it had, following the renames
    each page shows. A git failure ends the walk with what was read (the answer says it may be partial)."""
    commits: list[RawCommit] = []
    name, rev, remaining = raw, head, size
    capped = False
    queries = 0
    problem = ""
    for _ in range(MAX_FALLBACK_HOPS):
        try:
            batch = parse(git.log_paths([git_arg(name)], remaining, rev))
        except GitError as exc:
            info("nagent_lsp.history", "per-file history of %s failed: %s", display(name), exc)
            if not commits:
                problem = " ".join(str(exc).split())[:PROBLEM_CHARS]
            break
        queries += 1
        commits.extend(batch)
        remaining -= len(batch)
        if remaining <= 0:
            capped = True
            break
        if not batch:
            break
        oldest = batch[-1]
        renamed = next((old for st, p, old in oldest.changes if st == "R" and p == name), None)
        if renamed is None:
            break
        name, rev = renamed, f"{oldest.hash}^"
    else:
        capped = True
    partial = RepoIndex()
    partial.extend_newest_first(commits)
    partial.head = head
    lineage = partial.lineage(raw, size)
    return FirstPage(
        partial,
        Lineage(lineage.path, lineage.commits, lineage.names, lineage.complete and not capped, lineage.ids),
        alive_paths(root, partial, lineage.commits),
        queries,
        problem,
    )


def alive_paths(root: Path, index: RepoIndex, commits: Sequence[CommitRef]) -> frozenset[bytes]:
    """Which paths the commits touched are in the work tree (what the user sees of HEAD): a stat each, no git
    process on the first hover's path."""
    base = os.fsencode(root)
    touched = {index.paths[pid] for c in commits for pid in index.touched(c.id)}
    return frozenset(p for p in touched if os.path.lexists(os.path.join(base, p)))


class CountRules(NamedTuple):
    """How a view counts (the history settings, without importing the settings layer)."""

    max_commits: int
    max_changeset_files: int
    ignored: frozenset[str]  # `.git-blame-ignore-revs`


def partners_kept(
    index: RepoIndex, view: View | None, *, drop_dead: bool, alive: frozenset[bytes] | None
) -> Callable[[bytes], bool]:
    """Which co-edited paths a view shows: those alive in the index's view of HEAD (`drop_dead`), else those in
    `alive` (a first page's stat of the work tree), else all."""
    if drop_dead:
        return lambda path: not index.is_dead(index.path_ids[path], view)
    return alive.__contains__ if alive is not None else (lambda _p: True)


def history_view(
    index: RepoIndex,
    lineage: Lineage,
    view: View | None,
    root: Path,
    rules: CountRules,
    keep: Callable[[bytes], bool],
    summary: Callable[[CommitRef], str | None] | None = None,
) -> HistoryView:
    """The file's view over the newest `max_commits` commits of `lineage`, its co-edits counted per DESIGN §6."""
    window = lineage.commits[: rules.max_commits]
    own = set(lineage.names)
    paths = index.paths
    changesets = [(c.hash, [paths[index.canonical(pid, c.id, view)] for pid in index.touched(c.id)]) for c in window]
    ignored = rules.ignored
    table = coedit_table(
        changesets, own, rules.max_changeset_files, lambda h: is_ignored(h, ignored), keep, TOP, display
    )
    return HistoryView(
        file=display(lineage.path),
        repository=str(root),
        commits=window,
        total=lineage.total,
        complete=lineage.complete,
        coedits=table,
        summary=summary or (lambda _c: None),
    )
