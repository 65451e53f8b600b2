"""One `HistoryService` per repository (and state root): the front the operations and the LSP layer talk to. It
wires the parts, each in its own module, and keeps their public surface in one place:

- history.index_keeper: the repository index's lifecycle (load, build, follow HEAD, rebuild), `status()`, progress
  events (history.progress) and its file (history.persisted_index);
- history.file_history: a file's history at HEAD, from the index or, until it is ready, from a first page;
- history.line_blame: the commit that last changed a line (blame in the background, carried over, advanced);
- history.commit_summaries: the model's one-line commit summaries, in background batches, shared via git notes.

They share history.context: the repository, its git, one lock, the counters and the stop flag. Four thread pools,
one per kind of work (index 1, first pages 2, blame 1, summaries 1), so a hover is never queued behind a build.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history.commit_summaries import SUMMARY_LIMIT, CommitSummaries, Summarizer, SummaryItem
from nagent_lsp.history.context import Counters, HistoryContext
from nagent_lsp.history.file_history import HOVER_WAIT, FileEntry, FileHistory
from nagent_lsp.history.git import GitRepository
from nagent_lsp.history.index import CommitRef
from nagent_lsp.history.index_keeper import IndexKeeper
from nagent_lsp.history.line_blame import BLAME_WAIT, LineBlame
from nagent_lsp.history.persisted_index import PersistedIndex
from nagent_lsp.history.progress import HistoryEvent
from nagent_lsp.store.commit_summary_cache import CommitSummaryCache
from nagent_lsp.store.root import SUMMARIES


class HistoryService:
    """Thread-safe. `start()` loads or builds the index in the background; queries never wait for it."""

    def __init__(
        self,
        root: Path,
        cache_dir: Path,
        *,
        git: GitRepository | None = None,
        summarizer: Summarizer | None = None,
    ):
        self.root = Path(os.path.realpath(root))
        self.cache_dir = Path(cache_dir)
        self.git = git or GitRepository(self.root)
        digest = hashlib.sha1(str(self.root).encode("utf-8", "surrogateescape")).hexdigest()[:12]
        self.index_path = self.cache_dir / f"history-{digest}.idx"
        self.blame_path = self.cache_dir / f"history-{digest}.blame"  # blames made, so a restart need not redo them
        self.ctx = HistoryContext(self.root, self.git)
        self.summaries = CommitSummaryCache(self.cache_dir / SUMMARIES)
        persisted = PersistedIndex(self.index_path, self.cache_dir / f"history-index-{digest}.json", self.ctx.counters)
        self.keeper = IndexKeeper(
            self.ctx, persisted, on_change=lambda: self.files.forget(), before_load=lambda: self.blame.load()
        )
        self.files = FileHistory(self.ctx, self.keeper, self.summaries)
        self.blame = LineBlame(
            self.ctx, self.keeper, self.blame_path, lambda rel: self.files.entry(rel, HistorySettings(), sync=False)
        )
        self.commit_summaries = CommitSummaries(self.ctx, self.summaries, summarizer)

    @property
    def counters(self) -> Counters:
        return self.ctx.counters

    @property
    def stopping(self) -> threading.Event:
        """Set on close: a model call in flight polls it to give up."""
        return self.ctx.stopping

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def start(self, build: bool = True, *, after_first_answer: bool = False) -> Future:
        """Load the persisted index (bringing it up to HEAD), else build it (when `build`), in the background.
        `after_first_answer`: a cold build waits (at most a second) until the request that started it has its
        answer, so that request's own git query has the machine to itself."""
        return self.keeper.start(build, after_first_answer=after_first_answer)

    def load_now(self) -> bool:
        """For one-shot callers (CLI): use the persisted index if there is one, updated to HEAD; never a full build."""
        return self.start(build=False).result()

    def prepare(self, background: bool) -> None:
        """Before a query: a long-lived server starts (or keeps) the background build; a one-shot process loads
        the persisted index once and never builds."""
        if background:
            self.start(build=True, after_first_answer=True)
        elif not self.keeper.started:
            self.load_now()

    @property
    def ready(self) -> bool:
        return self.keeper.ready.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.keeper.ready.wait(timeout)

    def refresh(self) -> bool:
        """Synchronously bring the index up to the current HEAD (no-op when current). False: no index (yet)."""
        return self.keeper.refresh()

    def close(self, wait: bool = True) -> None:
        self.ctx.stopping.set()
        for pool in (self.keeper.pool, self.files.pool, self.blame.pool, self.commit_summaries.pool):
            pool.shutdown(wait=wait, cancel_futures=True)

    # -- state and progress --------------------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[HistoryService, HistoryEvent], None]) -> None:
        """`listener(service, event)` is called from the service's threads on every build/load begin, report, end."""
        self.keeper.progress.listeners.append(lambda event: listener(self, event))

    def status(self) -> dict[str, object]:
        """`{state, commits?, error?}`: idle (nothing asked yet), building, ready or failed."""
        return self.keeper.status()

    # -- queries -------------------------------------------------------------------------------------------------
    def entry(
        self, rel: str, hs: HistorySettings, *, sync: bool = True, wait: float = 0.0, page: int | None = None
    ) -> FileEntry | None:
        """The file's history at HEAD (history.file_history.FileHistory.entry)."""
        return self.files.entry(rel, hs, sync=sync, wait=wait, page=page)

    def line_commit(self, rel: str, line: int, entry: FileEntry, wait: float = 0.0) -> tuple[CommitRef | None, str]:
        """The commit that last changed `line` (1-based) at HEAD, or (None, why not) (history.line_blame)."""
        return self.blame.line_commit(rel, line, entry, wait)

    def wait_blame(self, rel: str, timeout: float | None = None) -> bool:
        return self.blame.wait(rel, timeout)

    def blame_stats(self) -> dict[str, int]:
        """What the line blames keep (history.line_blame.LineBlame.stats): files, blames, distinct, bytes, pending."""
        return self.blame.stats()

    # -- summaries (history.commit_summaries) --------------------------------------------------------------------
    def set_summarizer(self, summarizer: Summarizer | None) -> None:
        self.commit_summaries.summarizer = summarizer

    def use_summarizer(self, key: tuple[object, ...], make: Callable[[], Summarizer | None]) -> None:
        self.commit_summaries.use_summarizer(key, make)

    def share_summaries(self, notes: bool) -> None:
        self.commit_summaries.share_summaries(notes)

    def request_summaries(self, entry: FileEntry, hs: HistorySettings) -> Future | None:
        return self.commit_summaries.request(entry, hs)

    def wait_summaries(self, timeout: float | None = None) -> None:
        self.commit_summaries.wait(timeout)

    def missing_summaries(
        self, entry: FileEntry, limit: int = SUMMARY_LIMIT
    ) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str], list[str]]:
        return self.commit_summaries.missing(entry, limit)

    def summarize_now(self, todo: list[tuple[str, str]], subjects: dict, names: list[str]) -> None:
        self.commit_summaries.summarize_now(todo, subjects, names)

    def summaries_from_notes(self, entry: FileEntry, hs: HistorySettings) -> None:
        self.commit_summaries.from_notes(entry, hs)

    def take_from_notes(self, todo: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return self.commit_summaries.take_from_notes(todo)


__all__ = [
    "BLAME_WAIT",
    "HOVER_WAIT",
    "Counters",
    "HistoryEvent",
    "HistoryService",
    "Summarizer",
    "SummaryItem",
]
