"""What the parts of one repository's history service share: the repository, its git, one lock, the counters and
the stop flag. One lock for every part on purpose: a query reads the index and several caches together, and the
parts hand each other state under it (the old single service did the same), so no lock order can deadlock."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nagent_lsp.history.git import GitRepository
from nagent_lsp.history.ignore_revs import FILE_NAME as IGNORE_REVS
from nagent_lsp.history.ignore_revs import read_ignore_revs
from nagent_lsp.history.logparse import RawCommit, parse_log


class Closed(Exception):
    """The service was closed while a git stream was being read."""


@dataclass
class Counters:
    """What the service did; tests and the benchmark read these (e.g. "no git process for a warm hover")."""

    git_processes: int = 0
    builds: int = 0
    loads: int = 0
    incremental: int = 0  # HEAD moves applied to the index (appends and repaints)
    appended: int = 0  # commits read for those moves
    rewrites: int = 0  # times the index file was written whole
    appends: int = 0  # segments appended to it
    pages: int = 0  # first-page per-file queries
    blame_runs: int = 0
    blame_reused: int = 0  # blames carried to a new HEAD without git
    blame_advanced: int = 0  # blames moved forward by one commit's diff
    summary_requests: int = 0
    events: list[str] = field(default_factory=list)


class HistoryContext:
    def __init__(self, root: Path, git: GitRepository):
        self.root = root
        self.git = git
        self.lock = threading.RLock()  # the index and every part's caches
        self.counters = Counters()
        self.stopping = threading.Event()  # set on close: a model call in flight gives up within a second
        self._ignore_key: tuple[float, int] | None = None
        self._ignore_revs: frozenset[str] = frozenset()

    @property
    def closed(self) -> bool:
        return self.stopping.is_set()

    def log(self, stream: Iterable[bytes]) -> list[RawCommit]:
        """A whole `git log` stream parsed, counted as one git process."""
        self.counters.git_processes += 1
        return list(parse_log(stream))

    def until_closed(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        # close() during a long build stops reading, which kills the git process (history.git cleans up)
        for chunk in chunks:
            if self.closed:
                raise Closed()
            yield chunk

    def ignored(self) -> frozenset[str]:
        """The commits `.git-blame-ignore-revs` lists, re-read only when the file's stamp changes."""
        try:
            st = (self.root / IGNORE_REVS).stat()
            key: tuple[float, int] | None = (st.st_mtime, st.st_size)
        except OSError:
            key = None
        if key != self._ignore_key:
            self._ignore_revs = read_ignore_revs(self.root) if key else frozenset()
            self._ignore_key = key
        return self._ignore_revs
