"""One `HistoryService` per repository (and state root): the repository index, per-file fallbacks, blame
and commit summaries, all answered from memory once warm.

How answers are produced, fastest first:
1. the repository index in memory (built once in a background thread from ONE streamed `git log` pass, persisted
   under cache/ keyed by the HEAD it describes, updated incrementally when HEAD moves): no git process at all;
2. until it is ready, bounded per-file queries (one `git log -n maxCommits --full-diff` per name the file had),
   cached per (file, HEAD).
HEAD moving is noticed by reading .git files (no process). Blame runs once per (file, HEAD) in the background, and
commit summaries are asked of the model in background batches, once ever per (commit, path).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.history import render
from nagent_lsp.history.blame import is_ignored, parse_ignore_revs, parse_porcelain
from nagent_lsp.history.coedits import TOP, coedit_table
from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.history.index import CommitRef, Lineage, RepoIndex
from nagent_lsp.history.logparse import RawCommit, parse_log
from nagent_lsp.history.refs import read_head
from nagent_lsp.history.render import Author, HistoryView
from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.commit_summaries import FILE_NAME as SUMMARIES_FILE
from nagent_lsp.store.commit_summaries import CommitSummaryCache

log = logging.getLogger("nagent_lsp.history")

# (commit hash, path at that commit, subject, diff excerpt) -> {(hash, path): one-line summary}
SummaryItem = tuple[str, str, str, str]
Summarizer = Callable[[list[SummaryItem]], dict[tuple[str, str], str]]

SUMMARY_LIMIT = 50  # newest commits of a file that get model summaries (older ones keep their subject)
SUMMARY_BATCH = 20  # commits per model request
EXCERPT_CHARS = 4000  # diff excerpt per commit sent to the model
HOVER_STALE_WAIT = 0.25  # after HEAD moved, a hover waits this long for the incremental update, then answers anyway
BLAME_WAIT = 0.1  # the first hover of a (file, HEAD) waits this long for blame (small files finish; big ones don't)
MAX_FALLBACK_HOPS = 8  # renames followed by per-file queries before the index exists
CACHE_ENTRIES = 512


class _Closed(Exception):
    pass


@dataclass
class _Entry:
    view: HistoryView
    all_authors: list[Author]
    by_hash: dict[str, CommitRef]


@dataclass
class Counters:
    """What the service did; tests and the benchmark read these (e.g. "no git process for a warm hover")."""

    git_processes: int = 0
    builds: int = 0
    loads: int = 0
    incremental: int = 0
    summary_requests: int = 0


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
        self.index_path = self.cache_dir / f"history-index-{digest}.json"
        self.summaries = CommitSummaryCache(self.cache_dir / SUMMARIES_FILE)
        self.counters = Counters()
        self._summarizer = summarizer
        self._summarizer_key: tuple[object, ...] | None = None
        self.stopping = threading.Event()  # set on close: a model call in flight gives up within a second
        self._lock = threading.RLock()
        self._update_lock = threading.RLock()  # reentrant: a rebuild inside an update persists under it
        self._index: RepoIndex | None = None
        self._generation = 0
        self._ready = threading.Event()
        self._started = False
        self._closed = False
        self._pending: Future | None = None
        self._index_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-index")
        self._blame_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-blame")
        self._summary_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-summary")
        self._views: dict[tuple, _Entry] = {}
        self._fallback: dict[tuple, tuple[RepoIndex, Lineage]] = {}
        self._blame: dict[tuple[str, str], list[str] | None] = {}
        self._blame_pending: dict[tuple[str, str], Future] = {}
        self._summary_inflight: set[tuple[str, str]] = set()
        self._summary_failed: set[tuple[str, str]] = set()
        self._summary_futures: list[Future] = []
        self._ignore_key: tuple[float, int] | None = None
        self._ignore_revs: frozenset[str] = frozenset()

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def start(self, build: bool = True) -> Future:
        """Load the persisted index (bringing it up to HEAD), else build it (when `build`), in the background."""
        with self._lock:
            if self._started and self._pending is not None:
                return self._pending
            self._started = True
            self._pending = self._index_pool.submit(self._load_or_build, build)
            return self._pending

    def load_now(self) -> bool:
        """For one-shot callers (CLI): use the persisted index if there is one, updated to HEAD; never a full build."""
        return self.start(build=False).result()

    def prepare(self, background: bool) -> None:
        """Before a query: a long-lived server starts (or keeps) the background build; a one-shot process loads
        the persisted index once and never builds."""
        if background:
            self.start(build=True)
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
        for pool in (self._index_pool, self._blame_pool, self._summary_pool):
            pool.shutdown(wait=wait, cancel_futures=True)

    def set_summarizer(self, summarizer: Summarizer | None) -> None:
        self._summarizer = summarizer

    def use_summarizer(self, key: tuple[object, ...], make: Callable[[], Summarizer | None]) -> None:
        """Install `make()` unless the summariser made for `key` (the settings objects it came from) is in place.
        Keys are compared by identity: settings objects are replaced on every reload, and an id can be reused."""
        previous = self._summarizer_key
        same = previous is not None and len(previous) == len(key)
        same = same and all(a is b for a, b in zip(previous or (), key, strict=True))
        if not same:
            self._summarizer = make()
            self._summarizer_key = key

    # -- git access (counted) ------------------------------------------------------------------------------------
    def _log(self, stream: Iterable[bytes]) -> list[RawCommit]:
        self.counters.git_processes += 1
        return list(parse_log(stream))

    # -- index building and updating -----------------------------------------------------------------------------
    def _until_closed(self, chunks: Iterable[bytes]) -> Iterable[bytes]:
        # close() during a long build stops reading, which kills the git process (adapters.git cleans up)
        for chunk in chunks:
            if self._closed:
                raise _Closed()
            yield chunk

    def _load_or_build(self, build: bool) -> bool:
        try:
            head = read_head(self.root)
            loaded = self._load()
            if loaded is not None:
                self._install(loaded)
                self.counters.loads += 1
                if loaded.head == head:
                    return True
                return self._update_to(head, allow_rebuild=build)
            if build:
                self._build(head)
                return True
            return False
        except _Closed:
            return False
        except Exception:  # noqa: BLE001 - a broken build must not kill the server; per-file queries still work
            log.exception("history index for %s failed", self.root)
            return False

    def _load(self) -> RepoIndex | None:
        try:
            raw = self.index_path.read_bytes()
        except OSError:
            return None
        try:
            return RepoIndex.from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            log.info("ignoring unreadable history index %s: %s", self.index_path, exc)
            return None

    def _build(self, head: str | None) -> None:
        if head is not None:
            self.counters.git_processes += 1
            index = RepoIndex.from_log_stream(self._until_closed(self.git.log_all(head)))
        else:
            index = RepoIndex()
        index.head = head
        self.counters.builds += 1
        self._install(index)
        self._persist()

    def _install(self, index: RepoIndex) -> None:
        with self._lock:
            self._index = index
            self._generation += 1
            self._views.clear()
        self._ready.set()

    def _update_to(self, head: str | None, allow_rebuild: bool = True) -> bool:
        """Bring the index to `head`: append old..new when the old HEAD is an ancestor, else rebuild."""
        with self._update_lock:
            with self._lock:
                index = self._index
            if index is None or index.head == head:
                return index is not None
            old = index.head
            if head is not None and old is not None and self._is_ancestor(old, head):
                new = self._log(self.git.log_all(head, exclude=old))
                with self._lock:
                    index.extend_newest_first(new)
                    index.head = head
                    self._generation += 1
                    self._views.clear()
                self.counters.incremental += 1
                self._index_pool.submit(self._persist)
                return True
            # history rewritten (rebase, reset, other branch): the old index may hold commits HEAD lacks
            with self._lock:
                self._index = None
                self._generation += 1
                self._views.clear()
            self._ready.clear()
            if allow_rebuild:
                self._build(head)
                return True
            return False

    def _is_ancestor(self, old: str, new: str) -> bool:
        self.counters.git_processes += 1
        return self.git.is_ancestor(old, new)

    def _persist(self) -> None:
        # Serialised under the update lock, which every change to an index holds: appends cannot interleave,
        # and hovers (which only take the read lock) never wait for the JSON.
        with self._update_lock:
            with self._lock:
                index = self._index
            if index is None:
                return
            data = index.to_json({"root": str(self.root)})
        try:
            atomic_write_bytes(self.index_path, data)
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

    def entry(self, rel: str, hs: HistorySettings, *, sync: bool = True, wait: float = 0.0) -> _Entry | None:
        """The file's history. `sync`: a command may wait for git (incremental update, per-file query);
        a hover passes sync=False and waits at most `wait` seconds for an update after HEAD moved."""
        head = read_head(self.root)
        with self._lock:
            index = self._index
        if index is not None and index.head != head:
            if sync:
                self.refresh()
            else:
                future = self._schedule_refresh()
                if wait > 0:
                    try:
                        future.result(timeout=wait)
                    except Exception:  # noqa: BLE001 - timeout or failure: answer from what we have
                        pass
            with self._lock:
                index = self._index
        if index is not None:
            return self._entry_from_index(index, rel, hs)
        if head is None:
            return None
        return self._entry_from_git(rel, head, hs)

    def _entry_from_index(self, index: RepoIndex, rel: str, hs: HistorySettings) -> _Entry:
        ignored = self._ignored()
        with self._lock:
            key = (rel, self._generation, hs.maxCommits, hs.maxChangesetFiles, ignored)
            hit = self._views.get(key)
            if hit is not None:
                return hit
            lineage = index.lineage(rel)
            entry = self._make_entry(index, lineage, hs, ignored, complete=True, drop_dead=True)
            if len(self._views) > CACHE_ENTRIES:
                self._views.clear()
            self._views[key] = entry
            return entry

    def _entry_from_git(self, rel: str, head: str, hs: HistorySettings) -> _Entry:
        ignored = self._ignored()
        key = (rel, head, hs.maxCommits)
        with self._lock:
            cached = self._fallback.get(key)
        if cached is None:
            partial = RepoIndex()
            raw: list[RawCommit] = []
            name, rev, remaining = rel, head, hs.maxCommits
            for _ in range(MAX_FALLBACK_HOPS):
                try:
                    batch = self._log(self.git.log_paths([name], remaining, rev))
                except GitError as exc:
                    log.info("per-file history of %s failed: %s", name, exc)
                    break
                raw.extend(batch)
                remaining -= len(batch)
                if not batch or remaining <= 0:
                    break
                oldest = batch[-1]
                renamed = next((old for st, p, old in oldest.changes if st == "R" and p == name), None)
                if renamed is None:
                    break
                name, rev = renamed, f"{oldest.hash}^"
            partial.extend_newest_first(raw)
            partial.head = head
            lineage = partial.lineage(rel, hs.maxCommits)
            cached = (partial, lineage)
            with self._lock:
                if len(self._fallback) > CACHE_ENTRIES:
                    self._fallback.clear()
                self._fallback[key] = cached
        partial, lineage = cached
        with self._lock:
            return self._make_entry(partial, lineage, hs, ignored, complete=lineage.complete, drop_dead=False)

    def _make_entry(
        self,
        index: RepoIndex,
        lineage: Lineage,
        hs: HistorySettings,
        ignored: frozenset[str],
        *,
        complete: bool,
        drop_dead: bool,
    ) -> _Entry:
        window = lineage.commits[: hs.maxCommits]
        own = set(lineage.names)
        paths = index.paths
        changesets = [(c.hash, [paths[index.canonical(pid, c.id)] for pid in index.changes[c.id]]) for c in window]
        dead = index.dead
        keep = (lambda p: index.path_ids.get(p) not in dead) if drop_dead else (lambda p: True)
        table = coedit_table(changesets, own, hs.maxChangesetFiles, lambda h: is_ignored(h, ignored), keep, TOP)
        summaries = self.summaries
        view = HistoryView(
            file=lineage.path,
            repository=str(self.root),
            commits=window,
            total=len(lineage.commits),
            complete=complete and lineage.complete,
            coedits=table,
            summary=lambda c: summaries.get(c.hash, c.path),
        )
        return _Entry(view, render.authors_of(lineage.commits), {c.hash: c for c in lineage.commits})

    # -- blame ---------------------------------------------------------------------------------------------------
    def line_commit(self, rel: str, line: int, entry: _Entry, wait: float = 0.0) -> tuple[CommitRef | None, str]:
        """The commit that last changed `line` (1-based) at HEAD, or (None, why not). The first call for a
        (file, HEAD) starts blame in the background and waits at most `wait` seconds for it."""
        head = read_head(self.root)
        if head is None:
            return None, ""
        key = (rel, head)
        with self._lock:
            known = key in self._blame
            future = self._blame_pending.get(key)
            if not known and future is None:
                future = self._blame_pending[key] = self._blame_pool.submit(self._run_blame, rel, head)
        if not known and future is not None and wait > 0:
            try:
                future.result(timeout=wait)
            except Exception:  # noqa: BLE001 - still running: say so in the card
                pass
            known = key in self._blame
        with self._lock:
            lines = self._blame.get(key)
        if not known:
            return None, "finding its last commit…"
        if not lines or line > len(lines) or not lines[line - 1]:
            return None, "not committed yet"
        sha = lines[line - 1]
        if sha.startswith("0000000"):
            return None, "not committed yet"
        commit = entry.by_hash.get(sha)
        if commit is None:
            with self._lock:
                index = self._index
                cid = index.hash_ids.get(sha) if index is not None else None
                if index is not None and cid is not None:
                    commit = index.ref(cid, rel)
        if commit is None:
            return None, f"last changed in `{sha[:7]}`"
        return commit, ""

    def wait_blame(self, rel: str, timeout: float | None = None) -> bool:
        head = read_head(self.root)
        with self._lock:
            future = self._blame_pending.get((rel, head or ""))
        if future is None:
            return (rel, head) in self._blame
        future.result(timeout)
        return True

    def _run_blame(self, rel: str, head: str) -> None:
        ignore = self.root / ".git-blame-ignore-revs"
        try:
            self.counters.git_processes += 1
            data = self.git.blame(rel, head, ignore if ignore.is_file() else None)
            lines: list[str] | None = parse_porcelain(data)
        except GitError as exc:
            log.info("blame of %s failed: %s", rel, exc)
            lines = None
        with self._lock:
            self._blame[(rel, head)] = lines
            self._blame_pending.pop((rel, head), None)

    # -- summaries -----------------------------------------------------------------------------------------------
    def request_summaries(self, entry: _Entry, hs: HistorySettings) -> Future | None:
        """Ask the model, in the background, for the newest commits of this file that have no summary yet."""
        summarizer = self._summarizer
        if summarizer is None or not hs.summarize or self._closed:
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
        names = sorted({c.path for c in entry.by_hash.values()} | {entry.view.file})
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

    def _summarize(self, summarizer: Summarizer, todo: list[tuple[str, str]], subjects: dict, names: list[str]) -> None:
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
            text = body.decode("utf-8", "replace").strip("\n")
            if len(text) > EXCERPT_CHARS:
                text = text[:EXCERPT_CHARS] + f"\n… ({len(text) - EXCERPT_CHARS} more characters not shown)"
            out[sha.decode("ascii", "replace").strip()] = text
        return out
