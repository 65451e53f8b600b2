"""The commit that last changed a line at HEAD: blame run in the background, kept in a bounded LRU (and in
`cache/history-<digest>.blame`, so a restart need not redo it), carried over to a new HEAD when the file did not
change, or moved forward by one commit's diff when exactly one plain commit changed it.

Lazily (issue 29): a HEAD move blames nothing by itself; a file is blamed only when asked at the new HEAD, and only
after the index has reached that HEAD, so a blame kept from before is carried (or advanced) whenever it can be — a
switch back and forth reuses what it kept. A blame for a HEAD that is no longer checked out when its turn comes is
not made, and what a job does (carry, advance, blame) is decided when its turn comes, so a commit made while the
previous HEAD's blame ran is advanced from it. While a cold build reads the whole history, a blame waits for it."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cachetools import LRUCache

from nagent_lsp.history import blame as blame_file
from nagent_lsp.history.blame import Blame, advance, compact, parse_hunks, parse_porcelain
from nagent_lsp.history.context import HistoryContext
from nagent_lsp.history.encoding import display, git_arg, to_bytes
from nagent_lsp.history.file_history import FileEntry
from nagent_lsp.history.git import GitError, MissingObjects
from nagent_lsp.history.ignore_revs import is_ignored
from nagent_lsp.history.index import CommitRef
from nagent_lsp.history.index_keeper import IndexKeeper
from nagent_lsp.history.refs import read_head
from nagent_lsp.store import history_index as frames_file

log = logging.getLogger("nagent_lsp.history")

BLAME_WAIT = 0.05  # a hover waits this long for a blame it has just started, when it is quick (see SMALL_FILE)
SMALL_FILE = 16 * 1024  # a file this small usually blames in a few ms; a bigger one is never waited for
BLAME_BYTES = 8 * 1024 * 1024  # bytes of blames kept, whatever the number of HEADs and files (a blame shared by
# several HEADs counts once)
BLAME_FILES = 256  # files with blames kept
BLAME_FILE_FRAMES = 1024  # the blame cache file is rewritten from memory past this many appended blames
BLAME_HEADS = 3  # blames kept per file (the HEADs it was asked at most recently): enough to switch back and forth
UPDATE_WAIT = 30.0  # after HEAD moved, a blame waits this long for the index to reach it (to carry or advance)


@dataclass(frozen=True)
class BlameAt:
    head: str
    blame: Blame | None  # None: blame failed (e.g. the file is not in HEAD)
    newest: str | None  # the file's newest commit in the view the blame was made for
    total: int  # the file's commit count in that view
    # the file's history as that view lists it (its commits' hashes, newest first, the entry's window): equal at
    # another HEAD, the file has the same content and lines there (None: not known, e.g. read from the cache file)
    lineage: int | None = None
    problem: str = ""  # why blame is None, when that is worth saying in the card (a partial clone's missing objects)


Kept = tuple[BlameAt, ...]  # one file's blames, least recently used first


def _weigh(kept: Kept) -> int:
    """Bytes of one file's blames: a blame carried to several HEADs is one object, counted once; capped so one huge
    file is kept alone rather than refused by the LRU."""
    distinct = {id(b.blame): b.blame for b in kept if b.blame is not None}
    return min(BLAME_BYTES, 64 * len(kept) + sum(blame.nbytes for blame in distinct.values()))


class LineBlame:
    """The LRU maps a file to its BLAME_HEADS most recent blames; it is bounded by files and by bytes in all.
    Read and written under `ctx.lock`; blames run one at a time in their own pool. `entry_of(rel)` is the file's
    history from the index at HEAD (a blame that waited for the index reads the fingerprint it carries by)."""

    def __init__(
        self, ctx: HistoryContext, keeper: IndexKeeper, path: Path, entry_of: Callable[[str], FileEntry | None]
    ):
        self.ctx = ctx
        self.keeper = keeper
        self.path = path
        self.entry_of = entry_of
        self.file_size: int | None = None  # what this process last saw of the cache file; None: rewrite it
        self.frames = 0
        self.deferred = 0  # blames that waited for a cold build to end
        self.cache: LRUCache[bytes, Kept] = LRUCache(BLAME_BYTES, getsizeof=_weigh)
        self.pending: dict[tuple[bytes, str], Future] = {}
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-blame")

    def line_commit(self, rel: str, line: int, entry: FileEntry, wait: float = 0.0) -> tuple[CommitRef | None, str]:
        """The commit that last changed `line` (1-based) at HEAD, or (None, why not). A blame of the file at an
        earlier HEAD is carried over when the file did not change since; otherwise blame starts in the background
        and this waits at most `wait` seconds for it."""
        head = read_head(self.ctx.root)
        if head is None:
            return None, ""
        raw = to_bytes(rel)
        key = (raw, head)
        with self.ctx.lock:
            known = self._get(raw, head)
            future = self.pending.get(key)
            quick = False
            if known is None and future is None:
                known = self._carry(raw, head, entry)
                if known is None:
                    # HEAD moved and the index is on its way there: decide (carry, advance or blame) once it is
                    behind = self._index_behind(head)
                    base = None if behind else self._advance_base(raw, head, entry)
                    quick = not behind and (base is not None or _small(self.ctx.root / git_arg(raw)))
                    future = self.pool.submit(self._run, rel, head, entry, base, behind, time.monotonic())
                    self.pending[key] = future
        # waiting is worth it only for what finishes in a few ms: one commit's diff, or a small file's blame
        if known is None and future is not None and wait > 0 and quick:
            try:
                future.result(timeout=wait)
            except Exception:  # noqa: BLE001 - still running: say so in the card
                pass
            with self.ctx.lock:
                known = self._get(raw, head)
        if known is None:
            return None, "finding its last commit…"
        if known.blame is None and known.problem:
            return None, known.problem
        sha = known.blame.at(line) if known.blame is not None else ""
        if not sha or sha.startswith("0000000"):
            return None, "not committed yet"
        commit = entry.by_hash.get(sha)
        if commit is None:
            with self.ctx.lock:
                index = self.keeper.index
                cid = index.lookup(sha) if index is not None else None
                if index is not None and cid is not None:
                    commit = index.ref(cid, raw)
        if commit is None:
            return None, f"last changed in `{sha[:7]}`"
        return commit, ""

    def wait(self, rel: str, timeout: float | None = None) -> bool:
        head = read_head(self.ctx.root) or ""
        raw = to_bytes(rel)
        with self.ctx.lock:
            future = self.pending.get((raw, head))
            done = self._get(raw, head) is not None
        if future is None:
            return done
        future.result(timeout)
        return True

    def stats(self) -> dict[str, int]:
        """What is kept: files, blames (one per file and HEAD), distinct blame objects and their bytes; blames in
        progress, and how many waited for a cold build."""
        with self.ctx.lock:
            kept = [b for blames in self.cache.values() for b in blames]
            distinct = {id(b.blame): b.blame for b in kept if b.blame is not None}
            return {
                "files": len(self.cache),
                "blames": len(kept),
                "distinct": len(distinct),
                "bytes": int(self.cache.currsize),
                "pending": len(self.pending),
                "deferred": self.deferred,
            }

    # -- the LRU (under the lock) --------------------------------------------------------------------------------
    def _get(self, raw: bytes, head: str) -> BlameAt | None:
        kept = self.cache.get(raw)
        found = next((b for b in kept or () if b.head == head), None)
        if kept and found is not None and kept[-1] is not found:
            self.cache[raw] = (*(b for b in kept if b is not found), found)  # most recently used last
        return found

    def _keep(self, raw: bytes, blame: BlameAt) -> None:
        """Remember a blame; a file keeps its BLAME_HEADS most recent ones, the LRU at most BLAME_FILES files."""
        kept = [b for b in self.cache.get(raw, ()) if b.head != blame.head]
        self.cache[raw] = (*kept, blame)[-BLAME_HEADS:]
        while len(self.cache) > BLAME_FILES:
            self.cache.popitem()

    # -- without git: carried over or moved forward --------------------------------------------------------------
    def _carry(self, raw: bytes, head: str, entry: FileEntry) -> BlameAt | None:
        """A blame of this file made at another HEAD that is still exact here: same newest commit and count of the
        file's commits, and either that HEAD is an ancestor of this one or the file's listed history is the same
        (another branch where the file did not change: a switch back and forth). Called under the lock; no git."""
        index = self.keeper.index
        if entry.partial or index is None or index.head != head:
            return None
        newest, total = _fingerprint(entry)
        lineage = _lineage(entry)
        for cached in reversed(self.cache.get(raw, ())):
            if cached.newest != newest or cached.total != total:
                continue
            cid = index.lookup(cached.head)
            if cached.lineage == lineage or (cid is not None and index.view.has(cid)):
                carried = BlameAt(head, cached.blame, cached.newest, cached.total, lineage)
                self._keep(raw, carried)
                self.ctx.counters.blame_reused += 1
                return carried
        return None

    def _advance_base(self, raw: bytes, head: str, entry: FileEntry) -> tuple[str, Blame] | None:
        """(HEAD, blame) to move forward by one commit's diff: when exactly one new commit (not a merge, not in the
        ignore list, not a rename) changed the file since a HEAD we have a blame for. Under the lock; no git."""
        commits = entry.view.commits
        if entry.partial or len(commits) < 2 or is_ignored(commits[0].hash, self.ctx.ignored()):
            return None
        newest = commits[0]
        index = self.keeper.index
        if newest.raw_path != raw or index is None or index.head != head or len(index.parents_of(newest.id)) != 1:
            return None
        for cached in reversed(self.cache.get(raw, ())):
            if cached.blame is None:
                continue
            if cached.newest != commits[1].hash or cached.total != entry.view.total - 1:
                continue
            cid = index.lookup(cached.head)
            if cid is not None and index.view.has(cid) and cid < newest.id:
                return cached.head, cached.blame
        return None

    def _index_behind(self, head: str) -> bool:
        """The index exists, is not being built, and is not at `head` yet: an incremental update will bring it
        there (file_history schedules it). Under the lock."""
        index = self.keeper.index
        return index is not None and index.head != head and self.keeper.state == "ready"

    def _settle(
        self, rel: str, head: str, entry: FileEntry, base: tuple[str, Blame] | None, behind: bool
    ) -> tuple[bool, FileEntry, tuple[str, Blame] | None]:
        """In the blame thread, when the job's turn comes (the blames before it may have kept what it can use):
        after HEAD moved (`behind`), first wait for the index to reach `head` and read the file's entry there; then
        carry a kept blame or find a base to advance from. (done, entry, base): done when no blame is to be made
        (carried, or `head` is no longer checked out: nobody is there to ask)."""
        raw = to_bytes(rel)
        if behind:
            try:
                self.keeper.schedule_refresh().result(timeout=UPDATE_WAIT)
            except Exception as exc:  # noqa: BLE001 - a slow or failed update: blame without the index, as before
                log.debug("blame of %s: the index did not reach %s: %s", rel, head[:12], exc)
        if read_head(self.ctx.root) != head:
            return True, entry, None
        if behind:
            with self.ctx.lock:
                index = self.keeper.index
                ready = index is not None and index.head == head
            fresh = self.entry_of(rel) if ready else None  # from the index at `head`: memory only
            if fresh is None or fresh.partial:
                return False, entry, base
            entry = fresh
        with self.ctx.lock:
            if self._get(raw, head) is not None or self._carry(raw, head, entry) is not None:
                return True, entry, None
            return False, entry, base or self._advance_base(raw, head, entry)

    # -- in the blame thread -------------------------------------------------------------------------------------
    def _after_build(self) -> str:
        """A cold build's `git log` pass and a blame compete for the cores (two, on the machines measured): the
        blame waits until the build has ended (or failed). Measured on git/git against running it at nice 10 and
        against not waiting (issue 29): the build stayed at its pass's speed and the blame's latency was no worse."""
        began = time.monotonic()
        if self.keeper.state == "building":
            with self.ctx.lock:
                self.deferred += 1
        while self.keeper.state == "building" and not self.ctx.closed:
            self.keeper.ready.wait(1.0)
        waited = time.monotonic() - began
        return f" (waited {waited:.1f} s for the index build)" if waited >= 0.01 else ""

    def _run(
        self, rel: str, head: str, entry: FileEntry, base: tuple[str, Blame] | None, behind: bool, asked: float
    ) -> None:
        raw = to_bytes(rel)
        done, entry, base = self._settle(rel, head, entry, base, behind)
        if done:
            with self.ctx.lock:
                self.pending.pop((raw, head), None)
            return
        ignore = self.ctx.root / ".git-blame-ignore-revs"
        counters = self.ctx.counters
        blame: Blame | None = None
        problem = ""
        try:
            if base is not None:
                try:
                    counters.git_processes += 1
                    hunks = parse_hunks(self.ctx.git.diff_zero_context(base[0], head, git_arg(raw)))
                    blame = advance(base[1], hunks, entry.view.commits[0].hash)
                    counters.blame_advanced += 1
                except GitError as exc:
                    log.debug("advancing the blame of %s failed: %s", display(raw), exc)
            if blame is None:
                counters.git_processes += 1
                counters.blame_runs += 1
                deferred = self._after_build()
                data = self.ctx.git.blame(git_arg(raw), head, ignore if ignore.is_file() else None)
                blame = compact(parse_porcelain(data))
                took = time.monotonic() - asked
                log.info("blame of %s at %s: %.3f s after it was asked%s", display(raw), head[:12], took, deferred)
        except GitError as exc:
            log.info("blame of %s failed: %s", display(raw), exc)
            blame = None
            problem = str(exc) if isinstance(exc, MissingObjects) else ""
        newest, total = (None, 0) if entry.partial else _fingerprint(entry)
        lineage = None if entry.partial else _lineage(entry)
        with self.ctx.lock:
            self._keep(raw, BlameAt(head, blame, newest, total, lineage, problem))
            self.pending.pop((raw, head), None)
        if blame is not None:
            self._save(raw, head, newest, total, blame)

    def _save(self, raw: bytes, head: str, newest: str | None, total: int, blame: Blame) -> None:
        """Append the blame to the cache file; rewrite the file from memory when it holds many more blames than the
        LRU keeps, or when another process changed it."""
        payload = blame_file.encode(raw, head, newest, total, blame)
        try:
            size = None
            if self.file_size is not None and self.frames < BLAME_FILE_FRAMES:
                size = frames_file.append_frame(self.path, payload, self.file_size)
            if size is None:
                frames = [blame_file.encode(*kept) for kept in self._in_order()]
                size = frames_file.write_frames(self.path, frames)
                self.frames = len(frames)
            else:
                self.frames += 1
            self.file_size = size
        except OSError as exc:
            log.info("cannot write the blame cache %s: %s", self.path, exc)

    def _in_order(self) -> list[tuple[bytes, str, str | None, int, Blame]]:
        """Every successful blame kept, least recently used first (so a reload keeps the same ones). Read from a
        copy: reading the LRU itself would reorder it."""
        with self.ctx.lock:
            snapshot = copy.copy(self.cache)
        out: list[tuple[bytes, str, str | None, int, Blame]] = []
        while snapshot:
            raw, kept = snapshot.popitem()
            out.extend((raw, b.head, b.newest, b.total, b.blame) for b in kept if b.blame is not None)
        return out

    def load(self) -> None:
        """The blames a previous run made (most recent last), into the LRU; an unreadable frame is skipped."""
        found = frames_file.read_frames(self.path)
        if found is None:
            return
        frames, size = found
        with self.ctx.lock:
            for payload in frames:
                try:
                    raw, head, newest, total, blame = blame_file.decode(payload)
                except (ValueError, KeyError, TypeError) as exc:
                    log.debug("skipping a blame cache frame: %s", exc)
                    continue
                self._keep(raw, BlameAt(head, blame, newest, total))
        self.file_size = size
        self.frames = len(frames)


def _fingerprint(entry: FileEntry) -> tuple[str | None, int]:
    commits = entry.view.commits
    return (commits[0].hash if commits else None, entry.view.total)


def _lineage(entry: FileEntry) -> int:
    return hash(tuple(c.hash for c in entry.view.commits))


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size <= SMALL_FILE
    except OSError:
        return False
