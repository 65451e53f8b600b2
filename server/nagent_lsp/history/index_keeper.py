"""The repository index's lifecycle: load the persisted one (brought up to HEAD) or build it from ONE streamed
`git log` pass, in the background; follow HEAD by reading only the commits it lacks and repainting the view; rebuild
when the clone's shallow boundary moved; report state (`status()`) and build progress (history.progress).

Queries never wait for it: history.file_history answers from a first page until `index.head` is the current HEAD."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from nagent_lsp.history.context import Closed, HistoryContext
from nagent_lsp.history.git import GitError
from nagent_lsp.history.index import VIEWS, IndexBuilder, RepoIndex, View
from nagent_lsp.history.persisted_index import PersistedIndex
from nagent_lsp.history.progress import BuildProgress
from nagent_lsp.history.refs import git_dirs, local_heads, read_head

log = logging.getLogger("nagent_lsp.history")

FIRST_ANSWER_WAIT = 1.0  # a cold build starts after the first request's answer, or after this many seconds
RETRY_FAILED = 30.0  # seconds before a failed build is tried again
AFTER_READY = 1.0  # seconds after the index is ready before its background chores (checks, branch views) start


def release_freed_memory() -> None:
    """Hand what a cold build freed back to the system. glibc keeps memory a thread freed in that thread's arena
    (this pool's), so a 1M-commit build's transient columns (~250 MB) stayed in the server's RSS for good; its
    `malloc_trim` returns the free pages of every arena. Elsewhere (no glibc) this does nothing."""
    import ctypes  # here: only a build needs it

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class IndexKeeper:
    """`index`, `builder`, `state` and `generation` are read and written under `ctx.lock`; every change to the index
    and its file is serialised by `update_lock`. `on_change()` runs (under the lock) whenever the view changes."""

    def __init__(
        self,
        ctx: HistoryContext,
        file: PersistedIndex,
        *,
        on_change: Callable[[], None],
        before_load: Callable[[], None],
    ):
        self.ctx = ctx
        self.file = file
        self.progress = BuildProgress(ctx.counters)
        self.on_change = on_change
        self.before_load = before_load  # the blames a previous run made are read with the index
        self.update_lock = threading.RLock()
        self.index: RepoIndex | None = None
        self.builder: IndexBuilder | None = None  # the cold build in progress (partial answers read it)
        self.building_head: str | None = None
        self.state = "idle"
        self.error: str | None = None
        self.failed_at = 0.0
        self.generation = 0
        self.ready = threading.Event()
        self.started = False
        self.pending: Future | None = None
        self.loaded = threading.Event()  # the persisted index has been read (or found missing or unreadable)
        self.first_answer = threading.Event()  # the first request has its answer: a cold build may start
        self.shallow: tuple[float, int] | None = None
        self.head_listeners: list[Callable[[str | None], None]] = []  # told of every HEAD the view moves to
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-index")

    def start(self, build: bool = True, *, after_first_answer: bool = False) -> Future:
        with self.ctx.lock:
            retry = self.state == "failed" and time.monotonic() - self.failed_at > RETRY_FAILED
            if self.started and self.pending is not None and not retry:
                return self.pending
            self.started = True
            self.state = "building" if self.index is None else self.state
            self.loaded.clear()
            if not after_first_answer:
                self.first_answer.set()
            self.pending = self.pool.submit(self._load_or_build, build)
            return self.pending

    def status(self) -> dict[str, object]:
        with self.ctx.lock:
            out: dict[str, object] = {"state": self.state}
            index, builder = self.index, self.builder
            if index is not None:
                out["commits"] = index.view.count
            elif builder is not None:
                out["commits"] = builder.count
            if self.error and self.state == "failed":
                out["error"] = self.error
        return out

    def refresh(self) -> bool:
        """Synchronously bring the index up to the current HEAD (no-op when current). False: no index (yet)."""
        return self._update_to(read_head(self.ctx.root))

    def schedule_refresh(self) -> Future:
        with self.ctx.lock:
            if self.pending is None or self.pending.done():
                self.pending = self.pool.submit(self.refresh)
            return self.pending

    # -- loading and building ------------------------------------------------------------------------------------
    def _load_or_build(self, build: bool) -> bool:
        began = time.monotonic()
        try:
            head = read_head(self.ctx.root)
            try:
                self.before_load()
                loaded = self.file.load()
                if loaded is not None:
                    self.shallow = self._shallow_key()
            finally:
                self.loaded.set()
            if loaded is not None:
                self.ctx.counters.loads += 1
                self._install(loaded)  # queries answer from it now; its ids are checked soon (issue 29: load fast)
                if loaded.head != head and not self._validate(loaded):  # an update builds on its ids: check first
                    return self._rebuild(head, build)
                ok = loaded.head == head or self._update_to(head, allow_rebuild=build)
                if ok:
                    self._announce(f"loaded in {time.monotonic() - began:.2f} s")
                    if build:  # a long-lived server; a one-shot CLI answers (queries guarded) and exits
                        self._later(self._check_loaded, loaded)
                return ok
            if build:
                # the first request's own git query runs alone (both cores, the GIL): the build waits for it
                self.first_answer.wait(FIRST_ANSWER_WAIT)
                began = time.monotonic()
                self._build(head)
                self._announce(f"built in {time.monotonic() - began:.1f} s")
                self._later(self._prepare_branches)
                return True
            with self.ctx.lock:
                self.state = "idle"
            return False
        except Closed:
            return False
        except Exception as exc:  # noqa: BLE001 - a broken build must not kill the server; per-file queries still work
            log.exception("history index for %s failed", self.ctx.root)
            with self.ctx.lock:
                self.state = "failed"
                self.error = f"{type(exc).__name__}: {exc}"[:500]
                self.failed_at = time.monotonic()
                self.builder = None
            self.progress.emit("end", "failed", self.state)
            return False

    def _later(self, task: Callable[..., object], *args: object) -> None:
        """Run `task` in this pool AFTER_READY seconds from now: the first answers from a fresh index (a restart's
        first hover) have the machine to themselves, not the index's checks or the branches' views."""

        def submit() -> None:
            try:
                self.pool.submit(task, *args)
            except RuntimeError:  # the service closed meanwhile
                pass

        timer = threading.Timer(AFTER_READY, submit)
        timer.daemon = True
        timer.start()

    def _check_loaded(self, index: RepoIndex) -> None:
        """The deferred check of a loaded index's ids; then the branches' views."""
        if self.index is not index or self.ctx.stopping.is_set():
            return
        if not index.checked and not self._validate(index):
            self._rebuild(read_head(self.ctx.root), True)
            return
        self._prepare_branches()

    def _validate(self, index: RepoIndex) -> bool:
        """Check the ids of an index loaded without that check (history.index.RepoIndex.validate); False when the
        file lied (a stranger's state root, a disk error): the index is dropped and the file rewritten from a
        rebuild. Until then a query that trips over a bad id falls back to a first page (history.file_history)."""
        with self.update_lock:
            try:
                index.validate()
                return True
            except (ValueError, IndexError, OverflowError) as exc:
                log.info("ignoring unreadable history index %s: %s", self.file.path, exc)
                self.file.marks = None  # the next write replaces the file whole
                return False

    def _announce(self, how: str) -> None:
        with self.ctx.lock:
            index = self.index
            count = index.view.count if index is not None else 0
        log.info("history index of %s ready: %d commits (%s)", self.ctx.root, count, how)
        self.progress.emit("end", f"{count:,} commits", self.state, count)

    def _build(self, head: str | None) -> None:
        builder = IndexBuilder()
        with self.ctx.lock:
            self.builder = builder
            self.building_head = head
            self.state = "building"
        if head is not None:
            self.ctx.counters.git_processes += 1
            stream = self.ctx.until_closed(self.ctx.git.log_all(head))
            builder.feed(self.progress.reporting(builder, stream))
        builder.finish()
        index = builder.index
        index.checkout(View(head, None, len(index)))
        self.ctx.counters.builds += 1
        self.shallow = self._shallow_key()
        self._install(index)
        with self.ctx.lock:
            self.builder = None
        del builder
        release_freed_memory()  # before the write too: its peak is then the index's RSS, not the build's garbage
        self.persist(rewrite=True)
        release_freed_memory()

    def _install(self, index: RepoIndex) -> None:
        with self.ctx.lock:
            self.index = index
            self.generation += 1
            self.on_change()
            self.state = "ready"
            self.error = None
        self.ready.set()

    def _shallow_key(self) -> tuple[float, int] | None:
        dirs = git_dirs(self.ctx.root)
        if dirs is None:
            return None
        try:
            st = (dirs[1] / "shallow").stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    # -- following HEAD ------------------------------------------------------------------------------------------
    def _update_to(self, head: str | None, allow_rebuild: bool = True) -> bool:
        """Bring the index to `head`: repaint the view when the pool has it, else read the commits it lacks first.
        A rebuild happens only when the clone's shallow boundary moved (or the index cannot take the commits)."""
        with self.update_lock:
            with self.ctx.lock:
                index = self.index
            if index is None:
                return False
            if index.head == head:
                return True
            if self._shallow_key() != self.shallow:  # deepened or re-shallowed: older history changed
                return self._rebuild(head, allow_rebuild)
            view = index.view_for(head)
            if view is None and head is not None:
                try:
                    missing = self.ctx.log(self.ctx.git.log_all(head, exclude=index.tips))
                except GitError as exc:
                    log.info("history update to %s failed: %s", head[:12], exc)
                    return self._rebuild(head, allow_rebuild)
                with self.ctx.lock:
                    builder = IndexBuilder(index)
                    for commit in missing:
                        builder.add(commit)
                    self.ctx.counters.appended += len(builder.finish())
                view = index.view_for(head)
                if view is None:
                    return self._rebuild(head, allow_rebuild)
            assert view is not None
            with self.ctx.lock:
                index.checkout(view)
                self.generation += 1
                self.on_change()
            self.ctx.counters.incremental += 1
            self.pool.submit(self.persist)
            for listener in self.head_listeners:
                listener(head)
            return True

    def _prepare_branches(self) -> None:
        """Views of the most recently updated local branches, made ahead in this background thread: a first
        switch to a branch forked long ago otherwise reads its commits and repaints every commit between it and
        HEAD (~100k at 1M: 0.4-0.8 s, issue 29); after this, the switch finds its view kept and reads nothing."""
        added = 0
        with self.update_lock:
            index = self.index
            if index is None:
                return
            for sha in local_heads(self.ctx.root, VIEWS - 1):
                if self.ctx.stopping.is_set() or self.index is not index:
                    return
                if sha == index.head or index.has_view(sha):
                    continue
                if index.lookup(sha) is None:
                    try:
                        missing = self.ctx.log(self.ctx.git.log_all(sha, exclude=index.tips))
                    except GitError as exc:
                        log.info("history: branch %s not read: %s", sha[:12], exc)
                        continue
                    with self.ctx.lock:
                        builder = IndexBuilder(index)
                        for commit in missing:
                            builder.add(commit)
                        added += len(builder.finish())
                view = index.view_for(sha)  # reads the columns only: queries go on meanwhile
                if view is not None:
                    with self.ctx.lock:
                        index.keep_view(view)
        if added:
            self.ctx.counters.appended += added
            self.persist()  # the commits read (views are made again after a restart)

    def _rebuild(self, head: str | None, allow: bool) -> bool:
        with self.ctx.lock:
            self.index = None
            self.generation += 1
            self.on_change()
            self.state = "building" if allow else "idle"
        self.ready.clear()
        if not allow:
            return False
        began = time.monotonic()
        self._build(head)
        self._announce(f"rebuilt in {time.monotonic() - began:.1f} s")
        return True

    def persist(self, rewrite: bool = False) -> None:
        """Write what the file lacks (history.persisted_index decides between an append and a rewrite)."""
        with self.update_lock:
            with self.ctx.lock:
                index = self.index
                if index is None:
                    return
                segment = self.file.segment(index, rewrite)
            self.file.write(index, segment, self.ctx.lock)
