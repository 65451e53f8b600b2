"""A file's history at HEAD, as the hover, the commands and the edit loop ask for it.

Best first: the repository index when it is ready for the current HEAD (no git process at all); until then a bounded
first page per file (`git log -n50 --full-diff -- FILE`, one more page per rename seen), cached per (file, HEAD), or,
when the background build has already streamed past more of the file's commits than the page holds, what the stream
has seen. Both are marked partial. A hover never waits more than its budget: it answers with what is known and says
so ("50+ commits", "building history…"); the next hover refines."""

from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass

from cachetools import LRUCache

from nagent_lsp.config.defaults import FIRST_PAGE
from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history.coedits import CoeditTable
from nagent_lsp.history.context import HistoryContext
from nagent_lsp.history.encoding import display, to_bytes
from nagent_lsp.history.first_page import (
    CountRules,
    FirstPage,
    history_view,
    partners_kept,
    read_first_page,
)
from nagent_lsp.history.index import CommitRef, Lineage, RepoIndex, View
from nagent_lsp.history.index_keeper import IndexKeeper
from nagent_lsp.history.refs import read_head
from nagent_lsp.history.render import Author, HistoryView
from nagent_lsp.store.commit_summary_cache import CommitSummaryCache

log = logging.getLogger("nagent_lsp.history")

HOVER_WAIT = 0.25  # a hover waits at most this long for git (an update after HEAD moved, a first page), then answers
LOAD_WAIT = 2.0  # a command waits this long for a persisted index being loaded before it asks git itself
UPDATE_GRACE = 0.1  # after HEAD moved, a hover gives the index update this long before also asking for a page
ENTRY_CACHE = 256  # per-file answers kept (each holds at most maxCommits commits)
PAGE_CACHE = 128  # per-file first pages kept


@dataclass
class FileEntry:
    view: HistoryView
    all_authors: list[Author]
    by_hash: dict[str, CommitRef]  # the window's commits
    names: frozenset[bytes] = frozenset()  # every name the file had (pathspecs for git)
    head: str | None = None
    partial: bool = False  # not from the complete index of this HEAD: commits may be missing


class FileHistory:
    """Per-file answers (an LRU keyed by the index generation) and first pages (an LRU keyed by HEAD), under
    `ctx.lock`; first pages run in their own pool of two so a hover is not queued behind the index."""

    def __init__(self, ctx: HistoryContext, keeper: IndexKeeper, summaries: CommitSummaryCache):
        self.ctx = ctx
        self.keeper = keeper
        self.summaries = summaries
        self.entries: LRUCache[tuple, FileEntry] = LRUCache(ENTRY_CACHE)
        self.pages: LRUCache[tuple, FirstPage] = LRUCache(PAGE_CACHE)
        self.page_pending: dict[tuple, Future] = {}
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="nagent-history-query")

    def forget(self) -> None:
        """The index's view changed: answers made from the old one are dropped (under the lock)."""
        self.entries.clear()

    def entry(
        self, rel: str, hs: HistorySettings, *, sync: bool = True, wait: float = 0.0, page: int | None = None
    ) -> FileEntry | None:
        """The file's history at HEAD (`rel` as the file system gave it). `sync`: a command may wait for git (an
        incremental update, a first page); a hover passes sync=False and waits at most `wait` seconds in all.
        `page`: how many commits the per-file query fetches before the index is ready (a batch job asks for all
        it will use). Never an answer from another HEAD's view. None: no HEAD (an unborn branch, not a repository)."""
        deadline = time.monotonic() + wait
        page = FIRST_PAGE if page is None else page  # read at call time (tests shrink the first page)
        raw = to_bytes(rel)
        keeper = self.keeper
        head = read_head(self.ctx.root)
        with self.ctx.lock:
            index = keeper.index
        if index is None and keeper.started and not keeper.loaded.is_set() and keeper.file.path.exists():
            # a persisted index is being read (a few hundred ms on git.git): it answers completely, so wait for it
            # rather than slow it down with a per-file query; a hover that runs out of time says so
            keeper.loaded.wait(LOAD_WAIT if sync else max(0.0, deadline - time.monotonic()))
            with self.ctx.lock:
                index = keeper.index
            if index is None and not keeper.loaded.is_set() and not sync and head is not None:
                return self._nothing_known(raw, head)
        if index is not None and index.head != head:
            if sync and keeper.state == "ready":  # (a rebuild in progress is not waited for: a first page answers)
                keeper.refresh()
            else:
                # the update usually lands in a few tens of ms; if not, a first page for the new HEAD races it
                update = keeper.schedule_refresh()
                futures_wait([update], timeout=min(UPDATE_GRACE, max(0.0, deadline - time.monotonic())))
                if not update.done() and head is not None:
                    pending = self._page_future(raw, head, min(hs.maxCommits, page))
                    futures_wait([update, pending], max(0.0, deadline - time.monotonic()), FIRST_COMPLETED)
            with self.ctx.lock:
                index = keeper.index
        if index is not None and index.head == head:
            keeper.first_answer.set()
            try:
                return self._from_index(index, raw, hs)
            except (IndexError, ValueError, OverflowError, KeyError):
                # a persisted index whose ids are still being checked (index_keeper._validate drops it when they
                # are bad): a first page answers instead
                log.info("history index of %s unusable for %s", self.ctx.root, display(raw), exc_info=True)
        if head is None:
            keeper.first_answer.set()
            return None
        return self._before_index(raw, head, hs, sync, deadline, page)

    def _from_index(self, index: RepoIndex, raw: bytes, hs: HistorySettings) -> FileEntry:
        ignored = self.ctx.ignored()
        with self.ctx.lock:
            key = (raw, self.keeper.generation, hs.maxCommits, hs.maxChangesetFiles, ignored)
            hit = self.entries.get(key)
            if hit is not None:
                return hit
            view = index.view
            lineage = index.lineage(raw, view=view, window=hs.maxCommits)
            entry = self._make_entry(index, lineage, view, hs, ignored, drop_dead=True)
            self.entries[key] = entry
            return entry

    def _before_index(
        self, raw: bytes, head: str, hs: HistorySettings, sync: bool, deadline: float, first_page: int
    ) -> FileEntry:
        """Before the index is ready for `head`: the first page (waited for within the deadline unless `sync`), or
        what the background build has streamed when that holds more of the file's commits."""
        ignored = self.ctx.ignored()
        size = min(hs.maxCommits, first_page)
        key = (raw, head, size)
        keeper = self.keeper
        with self.ctx.lock:
            page = self.pages.get(key)
            builder = keeper.builder if keeper.building_head == head else None
            building = keeper.state == "building" or keeper.index is not None
        if page is None:
            future = self._page_future(raw, head, size)
            # a cold build waits for this first answer (it would halve the speed of the query it waits for)
            future.add_done_callback(lambda _f: keeper.first_answer.set())
            try:
                page = future.result(timeout=None if sync else max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                page = None
        else:
            keeper.first_answer.set()
        streamed: FirstPage | None = None
        if builder is not None:
            commits, _cut = builder.partial(raw, hs.maxCommits)
            if commits and (page is None or len(commits) > len(page.lineage.commits)):
                partial = RepoIndex()
                partial.extend_newest_first(commits)
                partial.head = head
                lineage = partial.lineage(raw, hs.maxCommits)
                streamed = FirstPage(partial, Lineage(lineage.path, lineage.commits, lineage.names, False, lineage.ids))
        chosen = streamed or page
        if chosen is None:
            return self._nothing_known(raw, head)
        entry = self._make_entry(
            chosen.repo_index, chosen.lineage, None, hs, ignored, drop_dead=False, alive=chosen.alive
        )
        entry.partial = True
        entry.head = head
        if chosen.problem:
            entry.view = entry.view._replace(problem=chosen.problem)
        if building:
            entry.view = entry.view._replace(building=True)
        return entry

    def _nothing_known(self, raw: bytes, head: str) -> FileEntry:
        """The answer when nothing about the file is known yet: no commits, not complete, being built."""
        empty = CoeditTable(0, ())
        view = HistoryView(display(raw), str(self.ctx.root), (), 0, False, empty, building=True)
        return FileEntry(view, [], {}, frozenset({raw}), head, partial=True)

    def _page_future(self, raw: bytes, head: str, size: int) -> Future:
        key = (raw, head, size)
        with self.ctx.lock:
            cached = self.pages.get(key)
            if cached is not None:
                done: Future = Future()
                done.set_result(cached)
                return done
            future = self.page_pending.get(key)
            if future is None:
                future = self.page_pending[key] = self.pool.submit(self._first_page, raw, head, size)
        return future

    def _first_page(self, raw: bytes, head: str, size: int) -> FirstPage:
        """The newest `size` commits of the file (history/first_page.py), kept in the page cache."""
        try:
            page = read_first_page(self.ctx.git, self.ctx.root, raw, head, size, self.ctx.log)
            self.ctx.counters.pages += page.queries
            if not page.problem:  # a failure may pass (a lock, a killed git): the next hover asks again
                with self.ctx.lock:
                    self.pages[(raw, head, size)] = page
            return page
        finally:
            with self.ctx.lock:
                self.page_pending.pop((raw, head, size), None)

    def _make_entry(
        self,
        index: RepoIndex,
        lineage: Lineage,
        view: View | None,
        hs: HistorySettings,
        ignored: frozenset[str],
        *,
        drop_dead: bool,
        alive: frozenset[bytes] | None = None,
    ) -> FileEntry:
        summaries = self.summaries
        history = history_view(
            index,
            lineage,
            view,
            self.ctx.root,
            CountRules(hs.maxCommits, hs.maxChangesetFiles, ignored),
            partners_kept(index, view, drop_dead=drop_dead, alive=alive),
            lambda c: summaries.get(c.hash, c.path),
        )
        window = history.commits
        return FileEntry(
            history,
            [Author(*person) for person in index.authors_of(lineage.ids)],
            {c.hash: c for c in window},
            lineage.names,
            index.head,
        )
