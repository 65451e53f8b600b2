"""One `HistoryService` per repository (and state root): the repository index, per-file first pages, blame and
commit summaries, all answered from memory once warm.

How answers are produced, best first:
1. the repository index (history.index), for the view of the current HEAD: no git process at all. It is loaded
   from cache/ (history-<digest>.idx, appended to on every HEAD move: store.history_index) or built in the background
   from ONE streamed `git log` pass; when HEAD moves it reads only the commits it lacks and repaints the view;
2. until it is ready for the current HEAD: a bounded first page per file (`git log -n50 --full-diff -- FILE`, one
   more page per rename seen), cached per (file, HEAD), or, when the background build has already streamed past
   more of the file's commits than the page holds, what the stream has seen. Both are marked partial.
A hover never waits more than its budget: it answers with what is known and says so ("50+ commits", "building
history…"); the next hover refines. HEAD moving is noticed by reading .git files (no process). Blame runs in the
background, is kept in a bounded LRU, and is carried over to a new HEAD when the file did not change (or moved
forward by one commit's diff). Commit summaries are asked of the model in background batches, once ever per
(commit, path).

The service reports its state (`status()`) and build progress (`add_listener`): the LSP layer turns those events
into `$/progress` without this package knowing about LSP.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history import blame as blame_file
from nagent_lsp.history.blame import (
    Blame,
    advance,
    compact,
    is_ignored,
    parse_hunks,
    parse_ignore_revs,
    parse_porcelain,
)
from nagent_lsp.history.coedits import TOP, CoeditRow, CoeditTable, coedit_table
from nagent_lsp.history.encoding import display, git_arg, to_bytes
from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.history.index import CommitRef, IndexBuilder, Lineage, Marks, RepoIndex, View
from nagent_lsp.history.logparse import RawCommit, parse_log
from nagent_lsp.history.refs import git_dirs, read_head
from nagent_lsp.history.render import Author, HistoryView
from nagent_lsp.history.summary_notes import SummaryNotes
from nagent_lsp.store import history_index as index_file
from nagent_lsp.store.commit_summaries import FILE_NAME as SUMMARIES_FILE
from nagent_lsp.store.commit_summaries import CommitSummaryCache

log = logging.getLogger("nagent_lsp.history")

# (commit hash, path at that commit, subject, diff excerpt) -> {(hash, path): one-line summary}
SummaryItem = tuple[str, str, str, str]
Summarizer = Callable[[list[SummaryItem]], dict[tuple[str, str], str]]

SUMMARY_LIMIT = 50  # newest commits of a file that get model summaries (older ones keep their subject)
SUMMARY_BATCH = 20  # commits per model request
EXCERPT_CHARS = 4000  # diff excerpt per commit sent to the model
HOVER_WAIT = 0.25  # a hover waits at most this long for git (an update after HEAD moved, a first page), then answers
HOVER_STALE_WAIT = HOVER_WAIT  # the name callers used before
BLAME_WAIT = 0.05  # a hover waits this long for a blame it has just started, when it is quick (see SMALL_FILE)
SMALL_FILE = 16 * 1024  # a file this small usually blames in a few ms; a bigger one is never waited for
FIRST_ANSWER_WAIT = 1.0  # a cold build starts after the first request's answer, or after this many seconds
LOAD_WAIT = 2.0  # a command waits this long for a persisted index being loaded before it asks git itself
UPDATE_GRACE = 0.1  # after HEAD moved, a hover gives the index update this long before also asking for a page
FIRST_PAGE = 50  # commits of the per-file query before the index is ready (nagent's own window)
MAX_FALLBACK_HOPS = 8  # renames followed by per-file queries before the index exists
COMPACT_SEGMENTS = 1000  # the index file is rewritten as one segment after this many appends (~0.1 s of load)
RETRY_FAILED = 30.0  # seconds before a failed build is tried again
PROGRESS_EVERY = 0.5  # seconds between progress reports while building
PROGRESS_FROM = 1000  # a build shows progress once it has read this many commits (small ones finish unseen)
ENTRY_CACHE = 256  # per-file answers kept (each holds at most maxCommits commits)
PAGE_CACHE = 128  # per-file first pages kept
BLAME_LINES = 2_000_000  # line entries of blame kept (about 8 MB), whatever the number of HEADs and files
BLAME_FILES = 256
BLAME_FILE_FRAMES = 1024  # the blame cache file is rewritten from memory past this many appended blames
BLAME_HEADS = 3  # blames kept per file (the HEADs it was asked at most recently): enough to switch back and forth

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A dict bounded by entries and by a total weight; least recently used first out. Not thread-safe by itself."""

    def __init__(self, entries: int, weight: int | None = None, weigh: Callable[[V], int] = lambda _v: 1):
        self.entries = entries
        self.max_weight = weight
        self.weigh = weigh
        self.total = 0
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def get(self, key: K) -> V | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        self._data.move_to_end(key)
        return hit[0]

    def put(self, key: K, value: V) -> None:
        old = self._data.pop(key, None)
        if old is not None:
            self.total -= old[1]
        w = self.weigh(value)
        self._data[key] = (value, w)
        self.total += w
        while len(self._data) > self.entries or (
            self.max_weight is not None and self.total > self.max_weight and len(self._data) > 1
        ):
            _, (_, dropped) = self._data.popitem(last=False)
            self.total -= dropped

    def pop(self, key: K) -> V | None:
        hit = self._data.pop(key, None)
        if hit is None:
            return None
        self.total -= hit[1]
        return hit[0]

    def items(self) -> list[tuple[K, V]]:
        return [(k, v) for k, (v, _) in self._data.items()]

    def clear(self) -> None:
        self._data.clear()
        self.total = 0

    def __len__(self) -> int:
        return len(self._data)


class _Closed(Exception):
    pass


@dataclass
class _Entry:
    view: HistoryView
    all_authors: list[Author]
    by_hash: dict[str, CommitRef]  # the window's commits
    names: frozenset[bytes] = frozenset()  # every name the file had (pathspecs for git)
    head: str | None = None
    partial: bool = False  # not from the complete index of this HEAD: commits may be missing


@dataclass(frozen=True)
class _Page:
    index: RepoIndex
    lineage: Lineage
    # The page's co-edited paths that exist in the work tree: a page holds only the file's own commits, so a co-edited
    # file renamed in a commit outside them would show under both names; its old name is left out instead.
    alive: frozenset[bytes] | None = None


@dataclass(frozen=True)
class _BlameEntry:
    blame: Blame | None  # None: blame failed (e.g. the file is not in HEAD)
    newest: str | None  # the file's newest commit in the view the blame was made for
    total: int  # the file's commit count in that view


@dataclass(frozen=True)
class HistoryEvent:
    """What a listener hears: a build or load beginning, progressing and ending (state after it)."""

    kind: str  # "begin" | "report" | "end"
    title: str
    message: str
    commits: int | None = None
    state: str = "building"


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
        self._legacy_path = self.cache_dir / f"history-index-{digest}.json"
        self.blame_path = self.cache_dir / f"history-{digest}.blame"  # blames made, so a restart need not redo them
        self._blame_file_size: int | None = None
        self._blame_frames = 0
        self.summaries = CommitSummaryCache(self.cache_dir / SUMMARIES_FILE)
        self.counters = Counters()
        self._summarizer = summarizer
        self._summarizer_key: tuple[object, ...] | None = None
        self.share: SummaryNotes | None = None  # DESIGN §11: summaries also read from / written to git notes
        self.stopping = threading.Event()  # set on close: a model call in flight gives up within a second
        self._lock = threading.RLock()  # the index and the caches
        self._update_lock = threading.RLock()  # serialises every change to the index and its file
        self._index: RepoIndex | None = None
        self._builder: IndexBuilder | None = None  # the cold build in progress (partial answers read it)
        self._building_head: str | None = None
        self._state = "idle"
        self._error: str | None = None
        self._failed_at = 0.0
        self._generation = 0
        self._ready = threading.Event()
        self._started = False
        self._closed = False
        self._pending: Future | None = None
        self._loaded = threading.Event()  # the persisted index has been read (or found missing or unreadable)
        self._first_answer = threading.Event()  # the first request has its answer: a cold build may start
        self._marks: Marks | None = None  # what the index file holds; None: no file of ours yet
        self._file_size = 0
        self._segments = 0
        self._shallow: tuple[float, int] | None = None
        self._listeners: list[Callable[[HistoryService, HistoryEvent], None]] = []
        self._progress_shown = False
        self._index_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-index")
        self._query_pool = ThreadPoolExecutor(2, thread_name_prefix="nagent-history-query")
        self._blame_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-blame")
        self._summary_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-summary")
        self._entries: LRU[tuple, _Entry] = LRU(ENTRY_CACHE)
        self._pages: LRU[tuple, _Page] = LRU(PAGE_CACHE)
        self._page_pending: dict[tuple, Future] = {}
        self._blame: LRU[tuple[bytes, str], _BlameEntry] = LRU(
            BLAME_FILES, BLAME_LINES, lambda e: e.blame.weight if e.blame else 1
        )
        self._blame_pending: dict[tuple[bytes, str], Future] = {}
        self._summary_inflight: set[tuple[str, str]] = set()
        self._summary_failed: set[tuple[str, str]] = set()
        self._summary_futures: list[Future] = []
        self._ignore_key: tuple[float, int] | None = None
        self._ignore_revs: frozenset[str] = frozenset()

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def start(self, build: bool = True, *, after_first_answer: bool = False) -> Future:
        """Load the persisted index (bringing it up to HEAD), else build it (when `build`), in the background.
        `after_first_answer`: a cold build waits (at most FIRST_ANSWER_WAIT) until the request that started it has
        its answer, so that request's own git query has the machine to itself."""
        with self._lock:
            retry = self._state == "failed" and time.monotonic() - self._failed_at > RETRY_FAILED
            if self._started and self._pending is not None and not retry:
                return self._pending
            self._started = True
            self._state = "building" if self._index is None else self._state
            self._loaded.clear()
            if not after_first_answer:
                self._first_answer.set()
            self._pending = self._index_pool.submit(self._load_or_build, build)
            return self._pending

    def load_now(self) -> bool:
        """For one-shot callers (CLI): use the persisted index if there is one, updated to HEAD; never a full build."""
        return self.start(build=False).result()

    def prepare(self, background: bool) -> None:
        """Before a query: a long-lived server starts (or keeps) the background build; a one-shot process loads
        the persisted index once and never builds."""
        if background:
            self.start(build=True, after_first_answer=True)
        elif not self._started:
            self.load_now()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    def close(self, wait: bool = True) -> None:
        self._closed = True
        self.stopping.set()
        for pool in (self._index_pool, self._query_pool, self._blame_pool, self._summary_pool):
            pool.shutdown(wait=wait, cancel_futures=True)

    def set_summarizer(self, summarizer: Summarizer | None) -> None:
        self._summarizer = summarizer

    def share_summaries(self, notes: bool) -> None:
        """`history.shareSummaries`: "notes" reads missing summaries from git notes before asking the model, and writes
        the model's to them (history.summary_notes); "off" does neither."""
        if notes and self.share is None:
            self.share = SummaryNotes(self.git)
        elif not notes:
            self.share = None

    def use_summarizer(self, key: tuple[object, ...], make: Callable[[], Summarizer | None]) -> None:
        """Install `make()` unless the summariser made for `key` (the settings objects it came from) is in place.
        Keys are compared by identity: settings objects are replaced on every reload, and an id can be reused."""
        previous = self._summarizer_key
        same = previous is not None and len(previous) == len(key)
        same = same and all(a is b for a, b in zip(previous or (), key, strict=True))
        if not same:
            self._summarizer = make()
            self._summarizer_key = key

    # -- state and progress --------------------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[HistoryService, HistoryEvent], None]) -> None:
        """`listener(service, event)` is called from the service's threads on every build/load begin, report, end."""
        self._listeners.append(listener)

    def _emit(self, kind: str, message: str, commits: int | None = None) -> None:
        """Progress events: "begin" once a build is big enough to be worth showing, "report"s, then one "end"."""
        if kind == "begin":
            if self._progress_shown:
                return
            self._progress_shown = True
        elif kind == "end":
            if not self._progress_shown:
                return
            self._progress_shown = False
        event = HistoryEvent(kind, "Indexing git history", message, commits, self._state)
        self.counters.events.append(kind)
        for listener in list(self._listeners):
            try:
                listener(self, event)
            except Exception as exc:  # noqa: BLE001 - a listener must never break the build
                log.debug("history listener failed: %s", exc)

    def status(self) -> dict[str, object]:
        """`{state, commits?, error?}`: idle (nothing asked yet), building, ready or failed."""
        with self._lock:
            out: dict[str, object] = {"state": self._state}
            index, builder = self._index, self._builder
            if index is not None:
                out["commits"] = index.view.count
            elif builder is not None:
                out["commits"] = builder.count
            if self._error and self._state == "failed":
                out["error"] = self._error
        return out

    # -- git access (counted) ------------------------------------------------------------------------------------
    def _log(self, stream: Iterable[bytes]) -> list[RawCommit]:
        self.counters.git_processes += 1
        return list(parse_log(stream))

    def _until_closed(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        # close() during a long build stops reading, which kills the git process (history.git cleans up)
        for chunk in chunks:
            if self._closed:
                raise _Closed()
            yield chunk

    # -- loading, building, updating -----------------------------------------------------------------------------
    def _load_or_build(self, build: bool) -> bool:
        began = time.monotonic()
        try:
            head = read_head(self.root)
            try:
                self._load_blames()
                loaded = self._load()
            finally:
                self._loaded.set()
            if loaded is not None:
                self.counters.loads += 1
                self._install(loaded)
                ok = loaded.head == head or self._update_to(head, allow_rebuild=build)
                if ok:
                    self._announce(f"loaded in {time.monotonic() - began:.2f} s")
                return ok
            if build:
                # the first request's own git query runs alone (both cores, the GIL): the build waits for it
                self._first_answer.wait(FIRST_ANSWER_WAIT)
                began = time.monotonic()
                self._build(head)
                self._announce(f"built in {time.monotonic() - began:.1f} s")
                return True
            with self._lock:
                self._state = "idle"
            return False
        except _Closed:
            return False
        except Exception as exc:  # noqa: BLE001 - a broken build must not kill the server; per-file queries still work
            log.exception("history index for %s failed", self.root)
            with self._lock:
                self._state = "failed"
                self._error = f"{type(exc).__name__}: {exc}"[:500]
                self._failed_at = time.monotonic()
                self._builder = None
            self._emit("end", "failed")
            return False

    def _announce(self, how: str) -> None:
        with self._lock:
            index = self._index
            count = index.view.count if index is not None else 0
        log.info("history index of %s ready: %d commits (%s)", self.root, count, how)
        self._emit("end", f"{count:,} commits", count)

    def _load(self) -> RepoIndex | None:
        if self._legacy_path.exists():
            index_file.remove(self._legacy_path)  # the JSON of format 1: never loaded again
        found = index_file.read_frames(self.index_path)
        if found is None:
            return None
        frames, size = found
        try:
            index = RepoIndex.decode(frames)
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            log.info("ignoring unreadable history index %s: %s", self.index_path, exc)
            return None
        self._marks = index.marks()
        self._file_size = size
        self._segments = max(0, len(frames) - 1)
        self._shallow = self._shallow_key()
        return index

    def _build(self, head: str | None) -> None:
        builder = IndexBuilder()
        with self._lock:
            self._builder = builder
            self._building_head = head
            self._state = "building"
        if head is not None:
            self.counters.git_processes += 1
            builder.feed(self._reporting(builder, self._until_closed(self.git.log_all(head))))
        builder.finish()
        index = builder.index
        index.checkout(View(head, None, len(index)))
        self.counters.builds += 1
        self._shallow = self._shallow_key()
        self._install(index)
        with self._lock:
            self._builder = None
        self._persist(rewrite=True)

    def _reporting(self, builder: IndexBuilder, chunks: Iterable[bytes]) -> Iterator[bytes]:
        last = 0.0
        for chunk in chunks:
            yield chunk
            if builder.count < PROGRESS_FROM:
                continue
            now = time.monotonic()
            if not self._progress_shown:
                self._emit("begin", "reading git history", builder.count)
            if now - last >= PROGRESS_EVERY:
                last = now
                self._emit("report", f"{builder.count:,} commits read", builder.count)

    def _install(self, index: RepoIndex) -> None:
        with self._lock:
            self._index = index
            self._generation += 1
            self._entries.clear()
            self._state = "ready"
            self._error = None
        self._ready.set()

    def _shallow_key(self) -> tuple[float, int] | None:
        dirs = git_dirs(self.root)
        if dirs is None:
            return None
        try:
            st = (dirs[1] / "shallow").stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def _update_to(self, head: str | None, allow_rebuild: bool = True) -> bool:
        """Bring the index to `head`: repaint the view when the pool has it, else read the commits it lacks first.
        A rebuild happens only when the clone's shallow boundary moved (or the index cannot take the commits)."""
        with self._update_lock:
            with self._lock:
                index = self._index
            if index is None:
                return False
            if index.head == head:
                return True
            if self._shallow_key() != self._shallow:  # deepened or re-shallowed: older history changed
                return self._rebuild(head, allow_rebuild)
            view = index.view_for(head)
            if view is None and head is not None:
                try:
                    missing = self._log(self.git.log_all(head, exclude=index.tips))
                except GitError as exc:
                    log.info("history update to %s failed: %s", head[:12], exc)
                    return self._rebuild(head, allow_rebuild)
                with self._lock:
                    builder = IndexBuilder(index)
                    for commit in missing:
                        builder.add(commit)
                    self.counters.appended += len(builder.finish())
                view = index.view_for(head)
                if view is None:
                    return self._rebuild(head, allow_rebuild)
            assert view is not None
            with self._lock:
                index.checkout(view)
                self._generation += 1
                self._entries.clear()
            self.counters.incremental += 1
            self._index_pool.submit(self._persist)
            return True

    def _rebuild(self, head: str | None, allow: bool) -> bool:
        with self._lock:
            self._index = None
            self._generation += 1
            self._entries.clear()
            self._state = "building" if allow else "idle"
        self._ready.clear()
        if not allow:
            return False
        began = time.monotonic()
        self._build(head)
        self._announce(f"rebuilt in {time.monotonic() - began:.1f} s")
        return True

    def _persist(self, rewrite: bool = False) -> None:
        """Append what the file lacks as one segment (a few hundred bytes per HEAD move); write it whole on the
        first build, when another process changed it, or every COMPACT_SEGMENTS appends."""
        with self._update_lock:
            with self._lock:
                index = self._index
                if index is None:
                    return
                since = self._marks
                whole = rewrite or since is None or self._segments >= COMPACT_SEGMENTS
                payload = index.encode_segment(Marks() if whole or since is None else since)
                marks = index.marks()
            try:
                size = None
                if not whole:
                    size = index_file.append_frame(self.index_path, payload, self._file_size)
                    if size is not None:
                        self._segments += 1
                        self.counters.appends += 1
                    else:
                        with self._lock:
                            payload = index.encode_segment(Marks())
                if size is None:
                    size = index_file.write_frames(self.index_path, [RepoIndex.header(), payload])
                    self._segments = 1
                    self.counters.rewrites += 1
                self._file_size = size
                self._marks = marks
            except OSError as exc:
                log.warning("cannot write history index %s: %s", self.index_path, exc)

    def refresh(self) -> bool:
        """Synchronously bring the index up to the current HEAD (no-op when current). False: no index (yet)."""
        return self._update_to(read_head(self.root))

    def _schedule_refresh(self) -> Future:
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._index_pool.submit(self.refresh)
            return self._pending

    # -- per-file answers ----------------------------------------------------------------------------------------
    def _ignored(self) -> frozenset[str]:
        path = self.root / ".git-blame-ignore-revs"
        try:
            st = path.stat()
            key = (st.st_mtime, st.st_size)
        except OSError:
            key = None
        if key != self._ignore_key:
            try:
                self._ignore_revs = parse_ignore_revs(path.read_text(encoding="utf-8")) if key else frozenset()
            except (OSError, UnicodeDecodeError):
                self._ignore_revs = frozenset()
            self._ignore_key = key
        return self._ignore_revs

    def entry(
        self, rel: str, hs: HistorySettings, *, sync: bool = True, wait: float = 0.0, page: int | None = None
    ) -> _Entry | None:
        """The file's history at HEAD (`rel` as the file system gave it). `sync`: a command may wait for git (an
        incremental update, a first page); a hover passes sync=False and waits at most `wait` seconds in all.
        `page`: how many commits the per-file query fetches before the index is ready (a batch job asks for all
        it will use). Never an answer from another HEAD's view. None: no HEAD (an unborn branch, not a repository)."""
        deadline = time.monotonic() + wait
        page = FIRST_PAGE if page is None else page  # read at call time (tests shrink the first page)
        raw = to_bytes(rel)
        head = read_head(self.root)
        with self._lock:
            index = self._index
        if index is None and self._started and not self._loaded.is_set() and self.index_path.exists():
            # a persisted index is being read (a few hundred ms on git.git): it answers completely, so wait for it
            # rather than slow it down with a per-file query; a hover that runs out of time says so
            self._loaded.wait(LOAD_WAIT if sync else max(0.0, deadline - time.monotonic()))
            with self._lock:
                index = self._index
            if index is None and not self._loaded.is_set() and not sync and head is not None:
                return self._nothing_known(raw, head)
        if index is not None and index.head != head:
            if sync and self._state == "ready":  # (a rebuild in progress is not waited for: a first page answers)
                self.refresh()
            else:
                # the update usually lands in a few tens of ms; if not, a first page for the new HEAD races it
                update = self._schedule_refresh()
                futures_wait([update], timeout=min(UPDATE_GRACE, max(0.0, deadline - time.monotonic())))
                if not update.done() and head is not None:
                    pending = self._page_future(raw, head, min(hs.maxCommits, page))
                    futures_wait([update, pending], max(0.0, deadline - time.monotonic()), FIRST_COMPLETED)
            with self._lock:
                index = self._index
        if index is not None and index.head == head:
            self._first_answer.set()
            return self._entry_from_index(index, raw, hs)
        if head is None:
            self._first_answer.set()
            return None
        return self._entry_before_index(raw, head, hs, sync, deadline, page)

    def _entry_from_index(self, index: RepoIndex, raw: bytes, hs: HistorySettings) -> _Entry:
        ignored = self._ignored()
        with self._lock:
            key = (raw, self._generation, hs.maxCommits, hs.maxChangesetFiles, ignored)
            hit = self._entries.get(key)
            if hit is not None:
                return hit
            view = index.view
            lineage = index.lineage(raw, view=view, window=hs.maxCommits)
            entry = self._make_entry(index, lineage, view, hs, ignored, drop_dead=True)
            self._entries.put(key, entry)
            return entry

    def _entry_before_index(
        self, raw: bytes, head: str, hs: HistorySettings, sync: bool, deadline: float, first_page: int
    ) -> _Entry:
        """Before the index is ready for `head`: the first page (waited for within the deadline unless `sync`), or
        what the background build has streamed when that holds more of the file's commits."""
        ignored = self._ignored()
        size = min(hs.maxCommits, first_page)
        key = (raw, head, size)
        with self._lock:
            page = self._pages.get(key)
            builder = self._builder if self._building_head == head else None
            building = self._state == "building" or self._index is not None
        if page is None:
            future = self._page_future(raw, head, size)
            # a cold build waits for this first answer (it would halve the speed of the query it waits for)
            future.add_done_callback(lambda _f: self._first_answer.set())
            try:
                page = future.result(timeout=None if sync else max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                page = None
        else:
            self._first_answer.set()
        streamed: _Page | None = None
        if builder is not None:
            commits, _cut = builder.partial(raw, hs.maxCommits)
            if commits and (page is None or len(commits) > len(page.lineage.commits)):
                partial = RepoIndex()
                partial.extend_newest_first(commits)
                partial.head = head
                lineage = partial.lineage(raw, hs.maxCommits)
                streamed = _Page(partial, Lineage(lineage.path, lineage.commits, lineage.names, False, lineage.ids))
        chosen = streamed or page
        if chosen is None:
            return self._nothing_known(raw, head)
        entry = self._make_entry(chosen.index, chosen.lineage, None, hs, ignored, drop_dead=False, alive=chosen.alive)
        entry.partial = True
        entry.head = head
        if building:
            entry.view = _with_building(entry.view)
        return entry

    def _nothing_known(self, raw: bytes, head: str) -> _Entry:
        """The answer when nothing about the file is known yet: no commits, not complete, being built."""
        empty = CoeditTable(0, ())
        view = HistoryView(display(raw), str(self.root), (), 0, False, empty, building=True)
        return _Entry(view, [], {}, frozenset({raw}), head, partial=True)

    def _page_future(self, raw: bytes, head: str, size: int) -> Future:
        key = (raw, head, size)
        with self._lock:
            cached = self._pages.get(key)
            if cached is not None:
                done: Future = Future()
                done.set_result(cached)
                return done
            future = self._page_pending.get(key)
            if future is None:
                future = self._page_pending[key] = self._query_pool.submit(self._first_page, raw, head, size)
        return future

    def _first_page(self, raw: bytes, head: str, size: int) -> _Page:
        """The newest `size` commits of the file (one `git log` per name it had, following renames seen)."""
        try:
            commits: list[RawCommit] = []
            name, rev, remaining = raw, head, size
            capped = False
            for _ in range(MAX_FALLBACK_HOPS):
                try:
                    batch = self._log(self.git.log_paths([git_arg(name)], remaining, rev))
                except GitError as exc:
                    log.info("per-file history of %s failed: %s", display(name), exc)
                    break
                self.counters.pages += 1
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
            page = _Page(
                partial,
                Lineage(lineage.path, lineage.commits, lineage.names, lineage.complete and not capped, lineage.ids),
                self._alive(partial, lineage.commits),
            )
            with self._lock:
                self._pages.put((raw, head, size), page)
            return page
        finally:
            with self._lock:
                self._page_pending.pop((raw, head, size), None)

    def _alive(self, index: RepoIndex, commits: Sequence[CommitRef]) -> frozenset[bytes]:
        """Which paths the commits touched are in the work tree (what the user sees of HEAD): a stat each, no git
        process on the first hover's path."""
        root = os.fsencode(self.root)
        touched = {index.paths[pid] for c in commits for pid in index.touched(c.id)}
        return frozenset(p for p in touched if os.path.lexists(os.path.join(root, p)))

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
    ) -> _Entry:
        window = lineage.commits[: hs.maxCommits]
        own = set(lineage.names)
        paths = index.paths
        changesets = [
            (c.hash, [paths[index.canonical(pid, c.id, view)] for pid in index.touched(c.id)]) for c in window
        ]

        def keep(path: bytes) -> bool:
            return not index.is_dead(index.path_ids[path], view)

        table = coedit_table(
            changesets,
            own,
            hs.maxChangesetFiles,
            lambda h: is_ignored(h, ignored),
            keep if drop_dead else (alive.__contains__ if alive is not None else (lambda _p: True)),
            TOP,
            display,
        )
        summaries = self.summaries
        history = HistoryView(
            file=display(lineage.path),
            repository=str(self.root),
            commits=window,
            total=lineage.total,
            complete=lineage.complete,
            coedits=table,
            summary=lambda c: summaries.get(c.hash, c.path),
        )
        return _Entry(
            history,
            [Author(*person) for person in index.authors_of(lineage.ids)],
            {c.hash: c for c in window},
            lineage.names,
            index.head,
        )

    # -- blame ---------------------------------------------------------------------------------------------------
    def line_commit(self, rel: str, line: int, entry: _Entry, wait: float = 0.0) -> tuple[CommitRef | None, str]:
        """The commit that last changed `line` (1-based) at HEAD, or (None, why not). A blame of the file at an
        earlier HEAD is carried over when the file did not change since; otherwise blame starts in the background
        and this waits at most `wait` seconds for it."""
        head = read_head(self.root)
        if head is None:
            return None, ""
        raw = to_bytes(rel)
        key = (raw, head)
        with self._lock:
            known = self._blame.get(key)
            future = self._blame_pending.get(key)
            quick = False
            if known is None and future is None:
                known = self._carry_blame(raw, head, entry)
                if known is None:
                    base = self._advance_base(raw, head, entry)
                    quick = base is not None or _small(self.root / git_arg(raw))
                    future = self._blame_pool.submit(self._run_blame, raw, head, entry, base)
                    self._blame_pending[key] = future
        # waiting is worth it only for what finishes in a few ms: one commit's diff, or a small file's blame
        if known is None and future is not None and wait > 0 and quick:
            try:
                future.result(timeout=wait)
            except Exception:  # noqa: BLE001 - still running: say so in the card
                pass
            with self._lock:
                known = self._blame.get(key)
        if known is None:
            return None, "finding its last commit…"
        sha = known.blame.at(line) if known.blame is not None else ""
        if not sha or sha.startswith("0000000"):
            return None, "not committed yet"
        commit = entry.by_hash.get(sha)
        if commit is None:
            with self._lock:
                index = self._index
                cid = index.lookup(sha) if index is not None else None
                if index is not None and cid is not None:
                    commit = index.ref(cid, raw)
        if commit is None:
            return None, f"last changed in `{sha[:7]}`"
        return commit, ""

    def _fingerprint(self, entry: _Entry) -> tuple[str | None, int]:
        commits = entry.view.commits
        return (commits[0].hash if commits else None, entry.view.total)

    def _carry_blame(self, raw: bytes, head: str, entry: _Entry) -> _BlameEntry | None:
        """A blame of this file made at another HEAD that is still exact here: same newest commit and count of the
        file's commits, and that HEAD is an ancestor of this one. Called under the lock; no git."""
        index = self._index
        if entry.partial or index is None or index.head != head:
            return None
        newest, total = self._fingerprint(entry)
        for (path, other), cached in reversed(self._blame.items()):
            if path != raw or cached.newest != newest or cached.total != total:
                continue
            cid = index.lookup(other)
            if cid is not None and index.view.has(cid):
                self._keep_blame(raw, head, cached)
                self.counters.blame_reused += 1
                return cached
        return None

    def wait_blame(self, rel: str, timeout: float | None = None) -> bool:
        head = read_head(self.root) or ""
        raw = to_bytes(rel)
        with self._lock:
            future = self._blame_pending.get((raw, head))
            done = self._blame.get((raw, head)) is not None
        if future is None:
            return done
        future.result(timeout)
        return True

    def _advance_base(self, raw: bytes, head: str, entry: _Entry) -> tuple[str, Blame] | None:
        """(HEAD, blame) to move forward by one commit's diff: when exactly one new commit (not a merge, not in the
        ignore list, not a rename) changed the file since a HEAD we have a blame for. Under the lock; no git."""
        commits = entry.view.commits
        if entry.partial or len(commits) < 2 or is_ignored(commits[0].hash, self._ignored()):
            return None
        newest = commits[0]
        index = self._index
        if newest.raw_path != raw or index is None or index.head != head or len(index.parents_of(newest.id)) != 1:
            return None
        for (path, other), cached in reversed(self._blame.items()):
            if path != raw or cached.blame is None:
                continue
            if cached.newest != commits[1].hash or cached.total != entry.view.total - 1:
                continue
            cid = index.lookup(other)
            if cid is not None and index.view.has(cid) and cid < newest.id:
                return other, cached.blame
        return None

    def _run_blame(self, raw: bytes, head: str, entry: _Entry, base: tuple[str, Blame] | None) -> None:
        ignore = self.root / ".git-blame-ignore-revs"
        blame: Blame | None = None
        try:
            if base is not None:
                try:
                    self.counters.git_processes += 1
                    hunks = parse_hunks(self.git.diff_zero_context(base[0], head, git_arg(raw)))
                    blame = advance(base[1], hunks, entry.view.commits[0].hash)
                    self.counters.blame_advanced += 1
                except GitError as exc:
                    log.debug("advancing the blame of %s failed: %s", display(raw), exc)
            if blame is None:
                self.counters.git_processes += 1
                self.counters.blame_runs += 1
                data = self.git.blame(git_arg(raw), head, ignore if ignore.is_file() else None)
                blame = compact(parse_porcelain(data))
        except GitError as exc:
            log.info("blame of %s failed: %s", display(raw), exc)
            blame = None
        newest, total = (None, 0) if entry.partial else self._fingerprint(entry)
        with self._lock:
            self._keep_blame(raw, head, _BlameEntry(blame, newest, total))
            self._blame_pending.pop((raw, head), None)
        if blame is not None:
            self._save_blame(raw, head, newest, total, blame)

    def _save_blame(self, raw: bytes, head: str, newest: str | None, total: int, blame: Blame) -> None:
        """Append the blame to the cache file (in the blame thread); rewrite the file from memory when it holds
        many more blames than the LRU keeps, or when another process changed it."""
        payload = blame_file.encode(raw, head, newest, total, blame)
        try:
            size = None
            if self._blame_file_size is not None and self._blame_frames < BLAME_FILE_FRAMES:
                size = index_file.append_frame(self.blame_path, payload, self._blame_file_size)
            if size is None:
                with self._lock:
                    kept = [(k, e) for k, e in self._blame.items() if e.blame is not None]
                frames = [blame_file.encode(k[0], k[1], e.newest, e.total, e.blame) for k, e in kept if e.blame]
                size = index_file.write_frames(self.blame_path, frames)
                self._blame_frames = len(frames)
            else:
                self._blame_frames += 1
            self._blame_file_size = size
        except OSError as exc:
            log.info("cannot write the blame cache %s: %s", self.blame_path, exc)

    def _load_blames(self) -> None:
        """The blames a previous run made (most recent last), into the LRU; an unreadable frame is skipped."""
        found = index_file.read_frames(self.blame_path)
        if found is None:
            return
        frames, size = found
        with self._lock:
            for payload in frames:
                try:
                    raw, head, newest, total, blame = blame_file.decode(payload)
                except (ValueError, KeyError, TypeError) as exc:
                    log.debug("skipping a blame cache frame: %s", exc)
                    continue
                self._keep_blame(raw, head, _BlameEntry(blame, newest, total))
        self._blame_file_size = size
        self._blame_frames = len(frames)

    def _keep_blame(self, raw: bytes, head: str, blame: _BlameEntry) -> None:
        """Remember a blame (under the lock); a file keeps its BLAME_HEADS most recent ones."""
        self._blame.put((raw, head), blame)
        mine = [key for key, _ in self._blame.items() if key[0] == raw]
        for key in mine[:-BLAME_HEADS]:
            self._blame.pop(key)

    # -- summaries -----------------------------------------------------------------------------------------------
    def request_summaries(self, entry: _Entry, hs: HistorySettings) -> Future | None:
        """Ask the model, in the background, for the newest commits of this file that have no summary yet."""
        summarizer = self._summarizer
        if (summarizer is None and self.share is None) or not hs.summarize or self._closed:
            return None
        commits = entry.view.commits[:SUMMARY_LIMIT]
        wanted = [(c.hash, c.path) for c in commits]
        with self._lock:
            todo = [
                p
                for p in self.summaries.missing(wanted)
                if p not in self._summary_inflight and p not in self._summary_failed
            ]
            if not todo:
                return None
            self._summary_inflight.update(todo)
        subjects = {(c.hash, c.path): c.subject for c in commits}
        names = sorted({git_arg(n) for n in entry.names} | {git_arg(c.raw_path) for c in commits if c.raw_path})
        future = self._summary_pool.submit(self._summarize, summarizer, todo, subjects, names)
        with self._lock:
            self._summary_futures = [f for f in self._summary_futures if not f.done()] + [future]
        return future

    def wait_summaries(self, timeout: float | None = None) -> None:
        with self._lock:
            futures = list(self._summary_futures)
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in futures:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.result(remaining)
            except Exception:  # noqa: BLE001 - timeouts and model failures are reported elsewhere
                return

    def missing_summaries(
        self, entry: _Entry, limit: int = SUMMARY_LIMIT
    ) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str], list[str]]:
        """For a caller that summarises in its own thread (`summaries warm`): the newest `limit` commits of the file
        with no summary yet, their subjects, and the file's names (for the diffs)."""
        commits = entry.view.commits[:limit]
        todo = self.summaries.missing([(c.hash, c.path) for c in commits])
        subjects = {(c.hash, c.path): c.subject for c in commits}
        names = sorted({git_arg(n) for n in entry.names} | {git_arg(c.raw_path) for c in commits if c.raw_path})
        return todo, subjects, names

    def summarize_now(self, todo: list[tuple[str, str]], subjects: dict, names: list[str]) -> None:
        """Summarise `todo` in the caller's thread (notes first when shared, then the model)."""
        self._summarize(self._summarizer, todo, subjects, names)

    def summaries_from_notes(self, entry: _Entry, hs: HistorySettings) -> None:
        """In the caller's thread, without asking a model: the shared notes' summaries of the file's newest commits
        (a one-shot CLI shows what the team already paid for; the server does this in `request_summaries`)."""
        if self.share is None or not hs.summarize:
            return
        todo, _subjects, _names = self.missing_summaries(entry, SUMMARY_LIMIT)
        self.take_from_notes(todo)

    def take_from_notes(self, todo: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Take what the shared notes hold into the cache; returns what is still missing."""
        share = self.share
        if share is None or not todo:
            return todo
        try:
            self.counters.git_processes += 3
            found = share.lookup(todo)
        except GitError as exc:
            log.info("could not read shared summaries: %s", exc)
            return todo
        if found:
            self.summaries.record(list(found), found)
        return [p for p in todo if p not in found]

    def _to_notes(self, answers: dict[tuple[str, str], str]) -> None:
        share = self.share
        if share is None or not answers:
            return
        try:
            self.counters.git_processes += 3
            share.add(answers)
        except GitError as exc:
            log.warning("could not write shared summaries to git notes: %s", exc)

    def _summarize(
        self, summarizer: Summarizer | None, todo: list[tuple[str, str]], subjects: dict, names: list[str]
    ) -> None:
        missing = self.take_from_notes(todo)
        with self._lock:
            self._summary_inflight.difference_update(set(todo) - set(missing) if summarizer is not None else todo)
        if summarizer is None:
            return  # shared notes only: what they do not hold keeps its subject
        todo = missing
        for start in range(0, len(todo), SUMMARY_BATCH):
            batch = todo[start : start + SUMMARY_BATCH]
            try:
                excerpts = self._excerpts([sha for sha, _ in batch], names)
                items = [(sha, path, subjects.get((sha, path), ""), excerpts.get(sha, "")) for sha, path in batch]
                self.counters.summary_requests += 1
                answers = summarizer(items)
                if not isinstance(answers, dict):
                    raise TypeError("summarizer returned no mapping")
                self.summaries.record(batch, answers)
                self._to_notes(answers)
            except Exception as exc:  # noqa: BLE001 - no summary is fine: the subject stands in
                log.warning("commit summaries failed: %s", exc)
                with self._lock:
                    self._summary_failed.update(batch)
            finally:
                with self._lock:
                    self._summary_inflight.difference_update(batch)

    def _excerpts(self, hashes: list[str], names: list[str]) -> dict[str, str]:
        self.counters.git_processes += 1
        data = b"".join(self.git.show_patches(hashes, names))
        out: dict[str, str] = {}
        for part in data.split(b"\x01"):
            if not part:
                continue
            sha, _, body = part.partition(b"\n")
            text = display(body).strip("\n")
            if len(text) > EXCERPT_CHARS:
                text = text[:EXCERPT_CHARS] + f"\n… ({len(text) - EXCERPT_CHARS} more characters not shown)"
            out[sha.decode("ascii", "replace").strip()] = text
        return out


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size <= SMALL_FILE
    except OSError:
        return False


def _with_building(view: HistoryView) -> HistoryView:
    return HistoryView(
        view.file, view.repository, view.commits, view.total, view.complete, view.coedits, view.summary, True
    )


__all__ = [
    "BLAME_WAIT",
    "HOVER_STALE_WAIT",
    "HOVER_WAIT",
    "CoeditRow",
    "CoeditTable",
    "Counters",
    "HistoryEvent",
    "HistoryService",
    "Summarizer",
]
