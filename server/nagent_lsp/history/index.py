"""Repository index: every commit HEAD has had, with the files it changed, queried per file from memory.

**A pool of commits, and a view per HEAD.** The index keeps every commit it has ever read (the history of HEAD, and
of the HEADs before it: the branch you switched away from, the commit you amended) in columns, with ids in
topological order (every parent has a smaller id than its children; git's own output order is fixed up where clock
skew breaks that). The pool is closed under ancestry: a commit's parents are always in it (except beyond a shallow
clone's boundary). What HEAD sees is a `View`: the commits reachable from it, as a byte mask over the pool (or "all").
Moving HEAD therefore never rebuilds anything:
- a fast-forward reads only the new commits (`git log NEW --not <HEADs already read>`) and appends them;
- an amend, rebase or reset reads only the commits the pool lacks (usually a handful) and repaints the mask by
  walking from the old and the new HEAD down to their common ancestors (`_paint`: the symmetric difference, no
  git process);
- a switch to a commit already in the pool (a branch and back, an older tag) reads nothing at all.
Every query takes the view it answers for, so nothing from another branch leaks into an answer.

**Bytes.** Paths, names, e-mails and subjects are git's bytes (history.encoding); paths are interned (`paths`,
`path_ids`), people too. Text is made when a `CommitRef` is handed out.

**Memory.** Per commit: its 20-byte hash, parent ids, author id, time, subject bytes and change entries live in
`array`/`bytearray` columns (no object per commit); hashes are found through a sorted 8-byte-prefix array. The
per-path commit lists (`by_path`) are arrays too. About 150 bytes per commit plus the subjects: see
docs/ARCHITECTURE.md for the ceiling at 1M commits.

**Persistence** (`encode_segment` / `decode`): the columns are written as segments, each holding the commits, paths
and people added since the previous one plus the HEAD it describes; a HEAD move appends one small segment instead
of rewriting the file, and loading is `array.frombytes` on each column plus one pass to rebuild the per-path lists.
The framing of segments in a file (lengths, checksums, append, compaction) is store.history_index's. No pickle, no
eval: the cache folder lives inside a repository a stranger may have prepared, so decoding checks every length.
"""

from __future__ import annotations

import json
import operator
import re
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, islice
from typing import NamedTuple, overload

from nagent_lsp.history.encoding import display
from nagent_lsp.history.logparse import RawCommit, split_records

FORMAT_VERSION = 3  # 3: the whole segment carries its view's mask; ids are checked after loading (validate)
MAX_RENAME_HOPS = 64
HASH = 20  # bytes of a binary SHA-1
TIPS = 16  # recent HEADs remembered as "everything they reach is in the pool" (the --not list of an update)
VIEWS = 6  # recent views kept (and local branches' views made ahead), so a switch back costs nothing

# Kinds of change entries (one byte each, beside the path id). A rename or copy is two entries: the new name with
# R or C, immediately followed by the old name with r or c. Sources are not "touched" by the commit.
SOURCE_KINDS = frozenset(b"rc")
_RENAME_SOURCE = ord("r")
_EVENTS = re.compile(b"[Dr]")  # the change kinds that end a name: a deletion, a rename's source
_DELETE = ord("D")

_EMPTY = array("I")


class CommitRef(NamedTuple):
    """One commit of a file's history, with the name the file had in it (text for people, bytes for git)."""

    id: int
    hash: str
    author: str
    email: str
    time: int
    subject: str
    path: str
    raw_path: bytes = b""


class Lineage(NamedTuple):
    path: bytes
    commits: tuple[CommitRef, ...]  # newest first: all of them, or the first `window` asked for
    names: frozenset[bytes]  # the current name and every former name reached
    complete: bool  # False when cut at a limit with older commits left
    ids: tuple[int, ...] = ()  # every commit found, newest first (`commits` may hold only the first of them)

    @property
    def total(self) -> int:
        return max(len(self.ids), len(self.commits))


class View:
    """The commits of the pool that one HEAD reaches: a byte per commit, or None for "every commit below size"
    (size None: every commit, whatever is added later: an index no HEAD was chosen for)."""

    __slots__ = ("head", "mask", "size", "_count")

    def __init__(self, head: str | None, mask: bytearray | None, size: int | None):
        self.head = head
        self.mask = mask
        self.size = size
        self._count: int | None = None

    def has(self, cid: int) -> bool:
        mask = self.mask
        if mask is None:
            return self.size is None or cid < self.size
        return cid < len(mask) and mask[cid] == 1

    @property
    def count(self) -> int:
        if self._count is None:
            self._count = (self.size or 0) if self.mask is None else self.mask.count(1)
        return self._count


EVERYTHING = View(None, None, None)


class HashLookup:
    """hash -> commit id without a Python object per commit: sorted 8-byte prefixes beside their ids, plus a small
    dict for recent additions (merged into the arrays when it grows)."""

    MERGE_AT = 50_000

    def __init__(self) -> None:
        self.keys = array("Q")
        self.ids = array("I")
        self.recent: dict[bytes, int] = {}

    def rebuild(self, hashes: bytearray, count: int) -> None:
        prefix = [key for (key,) in struct.iter_unpack(">Q12x", memoryview(hashes)[: count * HASH])]
        order = sorted(range(count), key=prefix.__getitem__)
        self.keys = array("Q", [prefix[i] for i in order])
        self.ids = array("I", order)
        self.recent = {}

    def add(self, raw: bytes, cid: int, hashes: bytearray) -> None:
        self.recent[raw] = cid
        if len(self.recent) >= self.MERGE_AT:
            self.rebuild(hashes, len(hashes) // HASH)

    def get(self, raw: bytes, hashes: bytearray) -> int | None:
        cid = self.recent.get(raw)
        if cid is not None:
            return cid
        key = int.from_bytes(raw[:8], "big")
        keys = self.keys
        i = bisect_left(keys, key)
        while i < len(keys) and keys[i] == key:
            cid = self.ids[i]
            if hashes[cid * HASH : cid * HASH + HASH] == raw:
                return cid
            i += 1
        return None


class PathLists:
    """path id -> the ascending ids of the commits on a path (that touched it, or that ended it), without an array
    object per path: a frozen base (every list one after the other in one array, an offset per path: what a whole
    segment stores, loaded by one `frombytes`), plus the paths that got commits since, whole, in a small dict.
    `get` answers a view of the base (no copy) or the path's own array."""

    __slots__ = ("_off", "_values", "_extra")

    def __init__(self, counts: Iterable[int] = (), values: array | None = None):
        self._off = array("Q", accumulate(counts, initial=0))
        self._values = values if values is not None else array("I")
        self._extra: dict[int, array] = {}

    @overload
    def get(self, pid: int) -> array | memoryview | None: ...
    @overload
    def get(self, pid: int, default: array) -> array | memoryview: ...
    def get(self, pid: int, default: array | None = None) -> array | memoryview | None:
        extra = self._extra.get(pid)
        if extra is not None:
            return extra
        off = self._off
        if 0 <= pid < len(off) - 1:
            a, b = off[pid], off[pid + 1]
            if b > a:
                return memoryview(self._values)[a:b]
        return default

    def extend(self, pid: int, cids: Iterable[int]) -> None:
        """Add commits (newer than every one the path has) to a path's list."""
        lst = self._extra.get(pid)
        if lst is None:
            base = self.get(pid)
            lst = self._extra[pid] = array("I", base) if base is not None else array("I")
        lst.extend(cids)

    def items(self) -> Iterator[tuple[int, array | memoryview]]:
        off, extra = self._off, self._extra
        for pid in range(len(off) - 1):
            if off[pid + 1] > off[pid] and pid not in extra:
                yield pid, memoryview(self._values)[off[pid] : off[pid + 1]]
        yield from extra.items()

    def parts(self, paths: int) -> list[bytes | memoryview]:
        """The lists of path ids 0..paths-1 as a whole segment stores them: the counts, then the ids."""
        if not self._extra and len(self._off) - 1 == paths:
            counts = array("I", map(operator.sub, islice(self._off, 1, None), self._off))
            return [counts.tobytes(), memoryview(self._values)]
        lists = [self.get(pid, _EMPTY) for pid in range(paths)]
        return [array("I", [len(lst) for lst in lists]).tobytes(), *(memoryview(lst) for lst in lists if lst)]

    def __len__(self) -> int:
        return len(self._values)

    @property
    def nbytes(self) -> int:
        return (
            self._off.itemsize * len(self._off)
            + self._values.itemsize * len(self._values)
            + sum(x.itemsize * len(x) for x in self._extra.values())
        )


class Marks(NamedTuple):
    """How much of an index a file already holds (what the next segment starts after)."""

    commits: int = 0
    paths: int = 0
    people: int = 0


def _raw_hash(hexsha: str) -> bytes | None:
    try:
        raw = bytes.fromhex(hexsha)
    except ValueError:
        return None
    return raw if len(raw) == HASH else None


class RepoIndex:
    def __init__(self) -> None:
        self.hashes = bytearray()
        self.parent1 = array("i")
        self.parent2 = array("i")
        self.more_parents: dict[int, tuple[int, ...]] = {}  # octopus merges: parents after the second
        self.author = array("I")
        self.time = array("q")
        self.subj_off = array("Q", [0])
        self.subj = bytearray()
        self.ch_off = array("Q", [0])
        self.ch_pid = array("I")
        self.ch_kind = bytearray()
        self.paths: list[bytes] = []
        self.path_ids: dict[bytes, int] = {}
        self.people: list[tuple[bytes, bytes]] = []
        self.people_ids: dict[tuple[bytes, bytes], int] = {}
        self._people_text: list[tuple[str, str]] = []
        self.by_path = PathLists()  # path id -> ascending ids of commits that touched it
        self.gone = PathLists()  # path id -> ascending ids of commits that deleted it or renamed it away
        self.renames_into: dict[int, list[tuple[int, int]]] = {}  # new pid -> [(commit id, old pid)] ascending
        self.renames_from: dict[int, list[tuple[int, int]]] = {}  # old pid -> [(commit id, new pid)] ascending
        self._lookup = HashLookup()
        self.view: View = EVERYTHING
        self.tips: list[str] = []  # recent HEADs whose every ancestor is in the pool (newest first)
        self._views: OrderedDict[str, View] = OrderedDict()
        self.checked = True  # every id checked (built here, or `validate`d); False: decoded with check=False

    # -- size and simple accessors --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.hashes) // HASH

    @property
    def head(self) -> str | None:
        return self.view.head

    @head.setter
    def head(self, value: str | None) -> None:
        """Label the index with a HEAD that reaches every commit in it (a per-file page, a test)."""
        self.view = View(value, None, len(self))

    def hash_of(self, cid: int) -> str:
        return self.hashes[cid * HASH : cid * HASH + HASH].hex()

    def lookup(self, hexsha: str) -> int | None:
        raw = _raw_hash(hexsha)
        return None if raw is None else self._lookup.get(raw, self.hashes)

    def subject_of(self, cid: int) -> bytes:
        return bytes(self.subj[self.subj_off[cid] : self.subj_off[cid + 1]])

    def parents_of(self, cid: int) -> tuple[int, ...]:
        first, second = self.parent1[cid], self.parent2[cid]
        if first < 0:
            return ()
        if second < 0:
            return (first,)
        return (first, second, *self.more_parents.get(cid, ()))

    def is_merge(self, cid: int) -> bool:
        return self.parent2[cid] >= 0

    def touched(self, cid: int) -> list[int]:
        """Path ids the commit changed (new names of renames, deleted paths too; not rename sources)."""
        kinds, pids = self.ch_kind, self.ch_pid
        return [pids[k] for k in range(self.ch_off[cid], self.ch_off[cid + 1]) if kinds[k] not in SOURCE_KINDS]

    def person_text(self, aid: int) -> tuple[str, str]:
        texts = self._people_text
        while len(texts) <= aid:  # people are only ever appended
            name, email = self.people[len(texts)]
            texts.append((display(name), display(email)))
        return texts[aid]

    def ref(self, cid: int, raw_path: bytes, shown: str | None = None) -> CommitRef:
        name, email = self.person_text(self.author[cid])
        return CommitRef(
            cid,
            self.hash_of(cid),
            name,
            email,
            self.time[cid],
            display(self.subject_of(cid)),
            display(raw_path) if shown is None else shown,
            raw_path,
        )

    # -- adding commits -------------------------------------------------------------------------------------------
    def _pid(self, path: bytes) -> int:
        pid = self.path_ids.get(path)
        if pid is None:
            pid = self.path_ids[path] = len(self.paths)
            self.paths.append(path)
        return pid

    def _person(self, name: bytes, email: bytes) -> int:
        key = (name, email)
        aid = self.people_ids.get(key)
        if aid is None:
            aid = self.people_ids[key] = len(self.people)
            self.people.append(key)
        return aid

    def _derive(self, start: int, by_path: Mapping[int, Iterable[int]] | None = None) -> None:
        """Per-path lists, renames and deletions for commits `start`.. (ids ascending keeps every list sorted).
        `by_path`: the new commits' ids per path when the caller has them already (a build, a loaded file), so only
        renames and deletions are looked for, with `bytes.find` rather than a Python step per change."""
        ch_off, pids, kinds = self.ch_off, self.ch_pid, self.ch_kind
        first, last = ch_off[start], ch_off[len(self)]
        if by_path is None:
            by_path = {}
            for cid in range(start, len(self)):
                k, end = ch_off[cid], ch_off[cid + 1]
                for j in range(k, end):
                    if kinds[j] not in SOURCE_KINDS:
                        pid = pids[j]
                        lst = by_path.get(pid)
                        if lst is None:
                            by_path[pid] = [cid]
                        else:
                            lst.append(cid)  # type: ignore[attr-defined]
        mine = self.by_path
        if start == 0 and not len(mine) and isinstance(by_path, Mapping):
            # a whole index (a cold build): every list one after the other, in path order
            counts = [len(by_path.get(pid, ())) for pid in range(len(self.paths))]  # type: ignore[arg-type]
            values = array("I")
            for pid, n in enumerate(counts):
                if n:
                    values.extend(by_path[pid])
            self.by_path = PathLists(counts, values)
        else:
            for pid, cids in by_path.items():
                mine.extend(pid, cids)
        into, away = self.renames_into, self.renames_from
        ended: dict[int, list[int]] = {}
        cid = start
        # deletions and rename sources, in entry order (so in commit order): one regex scan at C speed, then a
        # step per event (a bisect over the offsets from the last event's commit on)
        for found in _EVENTS.finditer(kinds, first, last):
            at = found.start()
            cid = bisect_right(ch_off, at, cid) - 1
            pid = pids[at]
            ended.setdefault(pid, []).append(cid)
            if kinds[at] == _RENAME_SOURCE:
                new = pids[at - 1]
                into.setdefault(new, []).append((cid, pid))
                away.setdefault(pid, []).append((cid, new))
        for pid, cids in ended.items():
            self.gone.extend(pid, cids)

    def extend_newest_first(self, commits: Iterable[RawCommit]) -> int:
        """Append a batch given in git's order (newest first); commits already here are skipped. Returns how many
        were new."""
        builder = IndexBuilder(self)
        for commit in commits:
            builder.add(commit)
        return len(builder.finish())

    # -- views ----------------------------------------------------------------------------------------------------
    def _reach(self, cid: int) -> bytearray:
        mask = bytearray(len(self))
        p1, p2, more = self.parent1, self.parent2, self.more_parents
        stack = [cid]
        push, pop = stack.append, stack.pop
        while stack:
            c = pop()
            if mask[c]:
                continue
            mask[c] = 1
            a = p1[c]
            if a >= 0:
                if not mask[a]:
                    push(a)
                b = p2[c]
                if b >= 0:
                    if not mask[b]:
                        push(b)
                    for x in more.get(c, ()):
                        push(x)
        return mask

    def _paint(self, old: int, new: int) -> tuple[list[int], list[int]]:
        """(commits only `old` reaches, commits only `new` reaches): one pass down the ids from the newer of the
        two (parents have smaller ids), carrying "reached from old" (1) and "from new" (2) to parents, until no
        commit below is reached from one side only."""
        if old == new:
            return [], []
        flags = bytearray(max(old, new) + 1)
        flags[old], flags[new] = 1, 2
        undecided = 2  # commits below the scan reached from one side only
        only_old: list[int] = []
        only_new: list[int] = []
        p1, p2, more = self.parent1, self.parent2, self.more_parents
        cid = max(old, new)
        while undecided and cid >= 0:
            f = flags[cid]
            if f:
                if f != 3:
                    undecided -= 1
                    (only_old if f == 1 else only_new).append(cid)
                a = p1[cid]
                if a >= 0:
                    parents = (a,) if p2[cid] < 0 else (a, p2[cid], *more.get(cid, ()))
                    for p in parents:
                        before = flags[p]
                        after = before | f
                        if after != before:
                            flags[p] = after
                            if before == 0:
                                if after != 3:
                                    undecided += 1
                            elif after == 3:
                                undecided -= 1
            cid -= 1
        return only_old, only_new

    def view_for(self, head: str | None) -> View | None:
        """The view of `head`, computed from the current one without git; None when `head` is not in the pool."""
        if head is None:
            return View(None, bytearray(), len(self))
        cached = self._views.get(head)
        if cached is not None:  # still exact: commits appended since are never reachable from an older view's HEAD
            self._views.move_to_end(head)
            return cached
        cid = self.lookup(head)
        if cid is None:
            return None
        current = self.view
        old = self.lookup(current.head) if current.head is not None else None
        if old is None:
            mask = self._reach(cid)
            return View(head, None if mask.count(1) == len(self) else mask, len(self))
        only_old, only_new = self._paint(old, cid)
        size = len(self) if current.size is None else current.size
        if current.mask is None and not only_old and len(only_new) == len(self) - size:
            return View(head, None, len(self))
        mask = bytearray(current.mask) if current.mask is not None else bytearray(b"\x01") * size
        mask.extend(bytes(len(self) - len(mask)))
        for c in only_old:
            mask[c] = 0
        for c in only_new:
            mask[c] = 1
        return View(head, mask, len(self))

    def has_view(self, head: str) -> bool:
        return head in self._views

    def keep_view(self, view: View) -> None:
        """Remember a view made ahead (a local branch) without making it the current one; the current view stays."""
        if view.head is None or view.head in self._views:
            return
        self._views[view.head] = view
        while len(self._views) > VIEWS:
            self._views.popitem(last=False)
        if self.view.head is not None and self.view.head not in self._views:  # never the current one
            self._views.popitem(last=False)
            self._views[self.view.head] = self.view

    def checkout(self, view: View) -> None:
        """Make `view` the one queries use by default, and remember its HEAD as a tip."""
        self.view = view
        if view.head is not None:
            self._views[view.head] = view
            self._views.move_to_end(view.head)
            while len(self._views) > VIEWS:
                self._views.popitem(last=False)
            self.tips = [view.head, *(t for t in self.tips if t != view.head)][:TIPS]

    # -- queries --------------------------------------------------------------------------------------------------
    def lineage(
        self, path: bytes, limit: int | None = None, view: View | None = None, window: int | None = None
    ) -> Lineage:
        """The file's commits newest first, following renames backwards; at most `limit` commits. Only the first
        `window` become `CommitRef`s (a hot file has thousands; the ids of all are in `ids`)."""
        seen = view or self.view
        has = seen.has
        ids_out: list[int] = []
        spans: list[tuple[int, int]] = []  # (path id, how many of ids_out in a row saw the file under it)
        names: set[bytes] = {path}
        pid = self.path_ids.get(path)
        upper = len(self)
        hops = 0
        complete = True
        while pid is not None and hops < MAX_RENAME_HOPS:
            hops += 1
            ids = self.by_path.get(pid, _EMPTY)
            renames = self.renames_into.get(pid, [])
            # the newest rename into this name below `upper` (and in the view) ends this name's segment
            k = bisect_left(renames, (upper, -1)) - 1
            while k >= 0 and not has(renames[k][0]):
                k -= 1
            floor_id, old = renames[k] if k >= 0 else (-1, None)
            found = _in_view(ids, bisect_left(ids, floor_id) if floor_id >= 0 else 0, bisect_left(ids, upper), seen)
            if limit is not None and len(ids_out) + len(found) > limit:
                del found[limit - len(ids_out) :]
                complete = False
            ids_out += found
            spans.append((pid, len(found)))
            if old is None or not complete:
                break
            names.add(self.paths[old])
            pid, upper = old, floor_id
        shown = ids_out[:window] if window is not None else ids_out
        refs = []
        at = 0
        for p, count in spans:
            if at >= len(shown):
                break
            raw, text = self.paths[p], display(self.paths[p])
            refs += [self.ref(c, raw, text) for c in shown[at : at + count]]
            at += count
        return Lineage(path, tuple(refs), frozenset(names), complete, tuple(ids_out))

    def authors_of(self, ids: Iterable[int]) -> list[tuple[str, str, int]]:
        """(name, email, commits) of these commits' authors: most commits first, then by name, then e-mail."""
        counts = Counter(map(self.author.__getitem__, ids))  # C speed: a hot file has thousands of commits
        people = [(*self.person_text(a), n) for a, n in counts.items()]
        return sorted(people, key=lambda p: (-p[2], p[0].lower(), p[1]))

    def canonical(self, pid: int, cid: int, view: View | None = None) -> int:
        """The name path `pid` (as seen in commit `cid`) has now, following later renames in the view forward."""
        has = (view or self.view).has
        hops = 0
        while hops < MAX_RENAME_HOPS:
            moves = self.renames_from.get(pid)
            if not moves:
                return pid
            k = bisect_left(moves, (cid + 1, -1))
            while k < len(moves) and not has(moves[k][0]):
                k += 1
            if k >= len(moves):
                return pid
            cid, pid = moves[k]
            hops += 1
        return pid

    def is_dead(self, pid: int, view: View | None = None) -> bool:
        """True when the path's last change in the view deleted it or renamed it away."""
        has = (view or self.view).has
        gone = self.gone.get(pid)
        if not gone:
            return False
        last_gone = next((c for c in reversed(gone) if has(c)), -1)
        if last_gone < 0:
            return False
        last_here = next((c for c in reversed(self.by_path.get(pid, _EMPTY)) if has(c)), -1)
        return last_gone >= last_here

    # -- persistence ----------------------------------------------------------------------------------------------
    def marks(self) -> Marks:
        return Marks(len(self), len(self.paths), len(self.people))

    def encode_segment(self, since: Marks = Marks()) -> bytes:  # noqa: B008 - Marks is immutable
        """Everything added after `since` (commits, paths, people) and the current HEAD, as one segment."""
        parts = self.segment_parts(since)
        try:
            return b"".join(parts)
        finally:
            release(parts)

    def segment_parts(self, since: Marks = Marks()) -> list[bytes | memoryview]:  # noqa: B008 - Marks is immutable
        """`encode_segment` as the buffers it is made of, most of them views of the columns (no copy): a writer
        streams them to disk (store.history_index.write_frames). The views pin the columns (an array that exports a
        buffer cannot grow), so the caller holds the index still until it has written them, then `release`s them."""
        c0, n = since.commits, len(self) - since.commits
        e0, e1 = self.ch_off[c0], self.ch_off[len(self)]
        s0, s1 = self.subj_off[c0], self.subj_off[len(self)]
        new_paths = self.paths[since.paths :]
        new_people = self.people[since.people :]
        view = self.view
        whole = c0 == 0
        meta: dict[str, object] = {
            "c0": c0,
            "n": n,
            "p0": since.paths,
            "np": len(new_paths),
            "a0": since.people,
            "na": len(new_people),
            "ne": e1 - e0,
            "ns": s1 - s0,
            "head": view.head,
            "all": view.mask is None and view.size == len(self),
            "tips": self.tips,
            "more": {str(c): list(ps) for c, ps in self.more_parents.items() if c >= c0},
        }
        parts: list[bytes | memoryview] = [
            memoryview(self.hashes)[c0 * HASH :],
            memoryview(self.parent1)[c0:],
            memoryview(self.parent2)[c0:],
            memoryview(self.author)[c0:],
            memoryview(self.time)[c0:],
            memoryview(self.subj_off)[c0 + 1 :],
            memoryview(self.subj)[s0:s1],
            memoryview(self.ch_off)[c0 + 1 :],
            memoryview(self.ch_pid)[e0:e1],
            memoryview(self.ch_kind)[e0:e1],
            array("I", [len(p) for p in new_paths]).tobytes(),
            b"".join(new_paths),
            array("I", [len(x) for person in new_people for x in person]).tobytes(),
            b"".join(x for person in new_people for x in person),
        ]
        if whole:
            # a whole index also carries what loading would otherwise recompute: the per-path commit lists, the
            # sorted hash prefixes and the view's mask (a walk over every commit at 1M: ~0.5 s)
            meta["inv"] = True
            parts += self.by_path.parts(len(self.paths)) + self.gone.parts(len(self.paths))
            renames = [(cid, new, old) for new, moves in self.renames_into.items() for cid, old in moves]
            parts.append(len(renames).to_bytes(4, "little"))
            parts.append(array("I", [x for triple in renames for x in triple]).tobytes())
            if self._lookup.recent:
                self._lookup.rebuild(self.hashes, len(self))
            parts += [memoryview(self._lookup.keys), memoryview(self._lookup.ids)]
            if not meta["all"] and view.head is not None:
                meta["mask"] = True
                if view.mask is None:  # "every commit below size"
                    size = view.size or 0
                    parts.append(b"\x01" * size + bytes(len(self) - size))
                else:
                    parts.append(memoryview(view.mask)[: len(self)])
                    parts.append(bytes(len(self) - len(view.mask)))
        head = json.dumps(meta, separators=(",", ":")).encode("ascii")
        return [len(head).to_bytes(4, "little"), head, *parts]

    @staticmethod
    def header() -> bytes:
        """The first frame of an index file: format, version and the byte order of the columns."""
        meta = {"format": "nagent-history-index", "version": FORMAT_VERSION, "byteorder": sys.byteorder}
        return json.dumps(meta).encode("ascii")

    @classmethod
    def decode(cls, frames: Iterable[bytes | memoryview], *, check: bool = True) -> RepoIndex:
        """The index a file's frames describe (header first, then segments in order). ValueError when anything is
        inconsistent; the caller then rebuilds.

        Every length is checked here (nothing is read past a segment, nothing is left over). The ids inside the
        columns (parents before children, paths and people that exist, ascending offsets and lists) are checked by
        `validate`, which this calls unless `check` is False: the server loads with check=False so a hover is
        answered at once, and validates right after, in the background (history.index_keeper), answering nothing
        from the index it cannot vouch for in the meantime beyond what a bad id can do: an IndexError, caught."""
        it = iter(frames)
        try:
            header = json.loads(bytes(next(it)))
        except (StopIteration, ValueError) as exc:
            raise ValueError("no history index header") from exc
        if not isinstance(header, dict) or header.get("format") != "nagent-history-index":
            raise ValueError("not a history index")
        if header.get("version") != FORMAT_VERSION:
            raise ValueError(f"history index version {header.get('version')!r}, expected {FORMAT_VERSION}")
        swap = header.get("byteorder") != sys.byteorder
        index = cls()
        meta: dict | None = None
        for payload in it:
            meta = index._apply_segment(payload, swap)
        if check:
            index.validate()
        else:
            index.checked = False
        if meta is not None:
            head = meta.get("head")
            tips = meta.get("tips")
            if isinstance(head, str):
                view = index.view_for(head)  # painted from the whole segment's view (no walk of every commit)
                if view is not None:
                    index.checkout(view)
            index.tips = [t for t in tips if isinstance(t, str)][:TIPS] if isinstance(tips, list) else []
        return index

    def validate(self) -> None:
        """Check every id the columns hold (ValueError naming what is wrong): offsets ascending and ending where
        their columns end, parents before their children, paths and people that exist, per-path lists ascending
        and within the pool, hash prefixes sorted. Linear, with C-speed passes where Python has them."""
        n = len(self)
        for name, offsets, size in (
            ("subject", self.subj_off, len(self.subj)),
            ("change", self.ch_off, len(self.ch_pid)),
        ):
            if len(offsets) != n + 1 or offsets[0] != 0 or offsets[-1] != size or not _ascending(offsets):
                raise ValueError(f"history index {name} offsets are inconsistent")
        if len(self.parent1) != n or len(self.parent2) != n or len(self.author) != n or len(self.time) != n:
            raise ValueError("history index columns differ in length")
        if n and (min(self.parent1) < -1 or min(self.parent2) < -1):
            raise ValueError("history index refers to unknown parents")
        ids = range(n)
        if not (all(map(operator.lt, self.parent1, ids)) and all(map(operator.lt, self.parent2, ids))):
            raise ValueError("history index refers to unknown parents (a parent after its child)")
        if (self.ch_pid and max(self.ch_pid) >= len(self.paths)) or (n and max(self.author) >= len(self.people)):
            raise ValueError("history index refers to unknown paths or people")
        if len(self.ch_kind) != len(self.ch_pid):
            raise ValueError("history index change columns differ in length")
        for table in (self.by_path, self.gone):
            for pid, lst in table.items():
                if not 0 <= pid < len(self.paths) or (lst and (lst[-1] >= n or not _ascending(lst))):
                    raise ValueError("history index per-path lists are inconsistent")
        for moves in self.renames_into.values():
            for cid, old in moves:
                if cid >= n or old >= len(self.paths):
                    raise ValueError("history index renames are inconsistent")
        if any(new >= len(self.paths) for new in self.renames_into):
            raise ValueError("history index renames are inconsistent")
        lookup = self._lookup
        if len(lookup.keys) != len(lookup.ids) or (lookup.ids and max(lookup.ids) >= n) or not _ascending(lookup.keys):
            raise ValueError("history index hash prefixes are inconsistent")
        for mask in [self.view.mask, *(v.mask for v in self._views.values())]:
            if mask is not None and len(mask) > n:
                raise ValueError("history index view is longer than the pool")
        self.checked = True

    def _apply_segment(self, payload: bytes | memoryview, swap: bool) -> dict:
        """Append one segment: every length checked, the ids inside left to `validate`."""
        view = memoryview(payload)
        pos = 0

        def take(size: int) -> memoryview:
            nonlocal pos
            if size < 0 or pos + size > len(view):
                raise ValueError("truncated history index segment")
            part = view[pos : pos + size]
            pos += size
            return part

        def column(code: str, count: int) -> array:
            out = array(code)
            out.frombytes(take(count * out.itemsize))
            if swap:
                out.byteswap()
            return out

        meta_len = int.from_bytes(take(4), "little")
        meta = json.loads(bytes(take(meta_len)))
        if not isinstance(meta, dict):
            raise ValueError("bad segment header")
        c0, n, p0, np_, a0, na, ne, ns = (int(meta[k]) for k in ("c0", "n", "p0", "np", "a0", "na", "ne", "ns"))
        if c0 != len(self) or p0 != len(self.paths) or a0 != len(self.people) or min(n, np_, na, ne, ns) < 0:
            raise ValueError("history index segments do not follow each other")
        hashes = take(n * HASH)
        parent1 = column("i", n)
        parent2 = column("i", n)
        authors = column("I", n)
        times = column("q", n)
        subj_off = column("Q", n)
        subj = take(ns)
        ch_off = column("Q", n)
        ch_pid = column("I", ne)
        ch_kind = take(ne)
        path_lens = column("I", np_)
        path_blob = take(sum(path_lens))
        people_lens = column("I", 2 * na)
        people_blob = take(sum(people_lens))
        lists: tuple[PathLists, PathLists, array] | None = None
        keys = ids = None
        if meta.get("inv"):
            if c0 != 0:
                raise ValueError("history index: per-path lists in a partial segment")
            counts = column("I", np_)
            cids = column("I", sum(counts))
            by_path = PathLists(counts, cids)
            counts = column("I", np_)
            gone = PathLists(counts, column("I", sum(counts)))
            renames = column("I", 3 * int.from_bytes(take(4), "little"))
            keys = column("Q", n)
            ids = column("I", n)
            sources = ch_kind.tobytes().count(b"r") + ch_kind.tobytes().count(b"c")
            if len(cids) != ne - sources:
                raise ValueError("history index per-path lists are inconsistent")
            lists = (by_path, gone, renames)
        mask = bytearray(take(c0 + n)) if meta.get("mask") else None
        if pos != len(view):
            raise ValueError("history index segment has trailing bytes")
        # offsets must continue where the previous segment ended (their order is `validate`'s)
        if n and (subj_off[-1] != self.subj_off[-1] + ns or ch_off[-1] != self.ch_off[-1] + ne):
            raise ValueError("history index offsets are inconsistent")
        if c0 == 0:  # the first segment: its columns are the index's (each copied once, from the file's map)
            self.hashes, self.subj, self.ch_kind = bytearray(hashes), bytearray(subj), bytearray(ch_kind)
            self.parent1, self.parent2, self.author, self.time = parent1, parent2, authors, times
            subj_off.insert(0, 0)
            ch_off.insert(0, 0)
            self.subj_off, self.ch_off, self.ch_pid = subj_off, ch_off, ch_pid
        else:
            self.hashes += hashes
            self.parent1.extend(parent1)
            self.parent2.extend(parent2)
            self.author.extend(authors)
            self.time.extend(times)
            self.subj_off.extend(subj_off)
            self.subj += subj
            self.ch_off.extend(ch_off)
            self.ch_pid.extend(ch_pid)
            self.ch_kind += ch_kind
        blob = bytes(path_blob)
        ends = list(accumulate(path_lens))
        new_paths = [blob[a:b] for a, b in zip([0, *ends], ends, strict=False)]
        self.path_ids.update(zip(new_paths, range(p0, p0 + np_), strict=True))
        self.paths += new_paths
        if len(self.path_ids) != len(self.paths):
            raise ValueError("history index holds a path twice")
        blob = bytes(people_blob)
        ends = list(accumulate(people_lens))
        fields = [blob[a:b] for a, b in zip([0, *ends], ends, strict=False)]
        new_people = list(zip(fields[0::2], fields[1::2], strict=True))
        self.people_ids.update(zip(new_people, range(a0, a0 + na), strict=True))
        self.people += new_people
        if len(self.people_ids) != len(self.people):
            raise ValueError("history index holds a person twice")
        more = meta.get("more") or {}
        if not isinstance(more, dict):
            raise ValueError("bad segment header")
        for key, value in more.items():
            extra = tuple(int(x) for x in value)
            if any(not 0 <= x < int(key) for x in extra) or not c0 <= int(key) < c0 + n:
                raise ValueError("history index refers to unknown parents")
            self.more_parents[int(key)] = extra
        if lists is None:
            self._derive(c0)
        else:  # what _derive would find, as the file has it (a walk over every change at 1M: ~1 s)
            self.by_path, self.gone, renames = lists
            into, away = self.renames_into, self.renames_from
            for cid, new, old in sorted(zip(renames[0::3], renames[1::3], renames[2::3], strict=True)):
                into.setdefault(new, []).append((cid, old))
                away.setdefault(old, []).append((cid, new))
        if keys is not None and ids is not None:
            self._lookup.keys, self._lookup.ids, self._lookup.recent = keys, ids, {}
        else:
            for cid in range(c0, c0 + n):
                self._lookup.add(bytes(self.hashes[cid * HASH : cid * HASH + HASH]), cid, self.hashes)
        head = meta.get("head")
        if c0 == 0 and isinstance(head, str):
            # the whole segment's view: later segments' HEADs are painted from it
            if meta.get("all"):
                self.checkout(View(head, None, len(self)))
            elif mask is not None and self.lookup(head) is not None:
                self.checkout(View(head, mask, len(self)))
        return meta


def _in_view(ids: array | memoryview, lo: int, hi: int, view: View) -> list[int]:
    """ids[lo:hi] that the view has, newest first, without a Python call per id (a hot file has thousands)."""
    span = ids[lo:hi]
    mask = view.mask
    if mask is None:
        size = view.size
        if size is not None and span and span[-1] >= size:
            span = span[: bisect_left(span, size)]
        return list(reversed(span))
    end = len(mask)
    return [c for c in reversed(span) if c < end and mask[c] == 1]


def release(parts: Iterable[object]) -> None:
    """Let go of the views `segment_parts` made (the columns may grow again)."""
    for part in parts:
        if isinstance(part, memoryview):
            part.release()


def _ascending(values: Sequence[int], strict: bool = False) -> bool:
    """Whether `values` never go down (strict: always go up), compared pairwise at C speed."""
    return all(map(operator.lt if strict else operator.le, values, islice(values, 1, None)))


class IndexBuilder:
    """Adds a batch of commits, given newest first (git's order), to an index: parsing the raw `git log` stream as it
    arrives (`feed`, the hot path of a cold build) or taking parsed commits (`add`), then `finish` gives them ids in
    topological order and appends them. The batch is held in columns too (a 1M-commit build must not hold millions
    of Python objects).

    While a long build runs, other threads may ask `partial(path)` for what the stream has shown so far."""

    def __init__(self, index: RepoIndex | None = None):
        self.index = index if index is not None else RepoIndex()
        self._dedupe = len(self.index) > 0
        self.count = 0  # commits taken so far (readers look no further)
        self._hashes = bytearray()
        self._parents = bytearray()  # binary parent hashes, concatenated
        self._par_off = array("Q", [0])
        self._author = array("I")
        self._time = array("q")
        self._subj = bytearray()
        self._subj_off = array("Q", [0])
        self._ch_off = array("Q", [0])
        self._ch_pid = array("I")
        self._ch_kind = bytearray()
        self._by_path: dict[int, array] = {}  # stream order (newest first), for partial answers
        self._renames: dict[int, list[tuple[int, int]]] = {}  # new pid -> [(stream id, old pid)]
        self._seen: set[bytes] = set()

    # -- taking commits -------------------------------------------------------------------------------------------
    def feed(self, chunks: Iterable[bytes]) -> None:
        for record in split_records(chunks):
            self._record(record)

    def _record(self, record: bytes) -> None:
        head, sep, rest = record.partition(b"\0")
        fields = head.split(b"\x1f", 5)
        if len(fields) != 6:
            return
        try:
            raw = bytes.fromhex(fields[0].decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return
        if len(raw) != HASH:
            return
        try:
            parents = bytes.fromhex(fields[1].decode("ascii"))  # fromhex skips the spaces between them
        except (UnicodeDecodeError, ValueError):
            parents = b""
        if len(parents) % HASH:
            parents = b""
        try:
            when = int(fields[4])
        except ValueError:
            when = 0
        entries: list[tuple[int, int]] = []
        if sep and len(rest) > 1:
            intern = self.index._pid
            tokens = rest[1:].split(b"\0") if rest[:1] == b"\n" else rest.split(b"\0")
            n = len(tokens) - 1
            i = 0
            while i < n:
                status = tokens[i][:1]
                if status == b"R" or status == b"C":
                    if i + 2 > n:
                        break
                    entries.append((intern(tokens[i + 2]), status[0]))
                    entries.append((intern(tokens[i + 1]), status[0] + 32))  # lower case: the source
                    i += 3
                else:
                    if i + 1 > n or not status:
                        break
                    entries.append((intern(tokens[i + 1]), status[0]))
                    i += 2
        self._take(raw, parents, fields[2], fields[3], when, fields[5], entries)

    def add(self, commit: RawCommit) -> None:
        raw = _raw_hash(commit.hash)
        if raw is None:
            return
        try:
            parents = bytes.fromhex("".join(commit.parents))
        except ValueError:
            parents = b""
        if len(parents) % HASH:
            parents = b""
        intern = self.index._pid
        entries: list[tuple[int, int]] = []
        for status, path, old in commit.changes:
            letter = ord(status[:1] or "M")
            entries.append((intern(path), letter))
            if old is not None and status[:1] in ("R", "C"):
                entries.append((intern(old), letter + 32))
        self._take(raw, parents, commit.author, commit.email, commit.time, commit.subject, entries)

    def _take(
        self, raw: bytes, parents: bytes, name: bytes, email: bytes, when: int, subject: bytes, entries: list
    ) -> None:
        if self._dedupe:
            if raw in self._seen or self.index._lookup.get(raw, self.index.hashes) is not None:
                return
            self._seen.add(raw)
        sid = self.count
        self._hashes += raw
        self._parents += parents
        self._par_off.append(len(self._parents))
        self._author.append(self.index._person(name, email))
        self._time.append(when)
        self._subj += subject
        self._subj_off.append(len(self._subj))
        by_path = self._by_path
        for k, (pid, kind) in enumerate(entries):
            self._ch_pid.append(pid)
            self._ch_kind.append(kind)
            if kind in SOURCE_KINDS:
                if kind == _RENAME_SOURCE:
                    self._renames.setdefault(entries[k - 1][0], []).append((sid, pid))
            else:
                lst = by_path.get(pid)
                if lst is None:
                    by_path[pid] = array("I", (sid,))
                else:
                    lst.append(sid)
        self._ch_off.append(len(self._ch_pid))
        self.count = sid + 1  # last: a reader that sees this commit sees all of it

    # -- partial answers while the stream runs ----------------------------------------------------------------------
    def partial(self, path: bytes, limit: int) -> tuple[list[RawCommit], bool]:
        """The file's commits among those streamed so far, newest first, following renames seen so far (at most
        `limit`); and whether the limit cut them. Safe to call from another thread while the stream is fed."""
        count = self.count
        out: list[RawCommit] = []
        pid = self.index.path_ids.get(path)
        lower = -1  # stream ids above this are older than the current name's segment start
        hops = 0
        while pid is not None and hops < MAX_RENAME_HOPS:
            hops += 1
            renames = [r for r in list(self._renames.get(pid, ())) if lower < r[0] < count]
            floor, old = min(renames) if renames else (count, None)
            sids = self._by_path.get(pid, _EMPTY)
            for i in range(bisect_left(sids, lower + 1), len(sids)):
                sid = sids[i]
                if sid >= count or sid > floor:
                    break
                if len(out) >= limit:
                    return out, True
                out.append(self._raw_commit(sid))
            if old is None:
                break
            pid, lower = old, floor
        return out, False

    def _raw_commit(self, sid: int) -> RawCommit:
        paths = self.index.paths
        changes: list[tuple[str, bytes, bytes | None]] = []
        start, end = self._ch_off[sid], self._ch_off[sid + 1]
        k = start
        while k < end:
            pid, kind = self._ch_pid[k], self._ch_kind[k]
            if k + 1 < end and self._ch_kind[k + 1] in SOURCE_KINDS:
                changes.append((chr(kind), paths[pid], paths[self._ch_pid[k + 1]]))
                k += 2
            else:
                changes.append((chr(kind), paths[pid], None))
                k += 1
        name, email = self.index.people[self._author[sid]]
        parents = self._parents[self._par_off[sid] : self._par_off[sid + 1]]
        return RawCommit(
            self._hashes[sid * HASH : sid * HASH + HASH].hex(),
            tuple(parents[i : i + HASH].hex() for i in range(0, len(parents), HASH)),
            name,
            email,
            self._time[sid],
            bytes(self._subj[self._subj_off[sid] : self._subj_off[sid + 1]]),
            tuple(changes),
        )

    # -- finishing ----------------------------------------------------------------------------------------------
    def _parent_links(self) -> tuple[array, dict[int, list[int]], HashLookup]:
        """Each stream id's first and second parent (`links[2s]`, `links[2s+1]`) and any further ones (`more`),
        encoded: a pool id (>= 0), -2 - stream id for a parent in this batch, -1 for none (beyond a shallow
        boundary, or known nowhere); and the batch's hash lookup (in stream ids)."""
        index, count, hashes = self.index, self.count, self._hashes
        batch = HashLookup()
        batch.rebuild(hashes, count)
        pool = index._lookup if len(index) else None
        links = array("q", [-1]) * (2 * count)
        more: dict[int, list[int]] = {}
        par, off = self._parents, self._par_off
        for s in range(count):
            k = 0
            for at in range(off[s], off[s + 1], HASH):
                raw = bytes(par[at : at + HASH])
                if s + 1 < count and hashes[(s + 1) * HASH : (s + 2) * HASH] == raw:
                    found = -3 - s  # git shows the first parent next, most of the time: -2 - (s + 1)
                elif (ps := batch.get(raw, hashes)) is not None:
                    found = -2 - ps
                elif pool is not None and (cid := pool.get(raw, index.hashes)) is not None:
                    found = cid
                else:
                    continue
                if k < 2:
                    links[2 * s + k] = found
                else:
                    more.setdefault(s, []).append(found)
                k += 1
        return links, more, batch

    def _order(self, links: array, more: dict[int, list[int]]) -> list[int]:
        """Stream ids in id order: oldest first (the stream's reverse), every parent before its children."""
        count = self.count
        order: list[int] = []
        place = order.append
        state = bytearray(count)  # 0 new, 1 parents being placed, 2 placed

        def in_batch(s: int) -> list[int]:
            found = [-2 - x for x in (links[2 * s], links[2 * s + 1], *more.get(s, ())) if x <= -2]
            return found

        for start in range(count - 1, -1, -1):
            if state[start]:
                continue
            a, b = links[2 * start], links[2 * start + 1]
            if (a > -2 or state[-2 - a] == 2) and (b > -2 or state[-2 - b] == 2) and start not in more:
                state[start] = 2  # the usual case: git showed its parents after it
                place(start)
                continue
            stack = [start]
            while stack:
                s = stack[-1]
                if state[s] == 2:
                    stack.pop()
                elif state[s] == 0:
                    state[s] = 1
                    # pushed in reverse so the first parent is placed first
                    stack.extend(p for p in reversed(in_batch(s)) if state[p] == 0)
                else:
                    stack.pop()
                    state[s] = 2
                    place(s)
        return order

    def finish(self) -> list[int]:
        """Append the batch to the index in topological order; returns the new commit ids (ascending)."""
        index = self.index
        count = self.count
        if not count:
            return []
        links, more, batch = self._parent_links()
        order = self._order(links, more)
        base = len(index)
        final = array("q", bytes(8 * count))
        for position, s in enumerate(order):
            final[s] = base + position

        def resolve(x: int) -> int:
            return x if x >= -1 else final[-2 - x]

        p1 = array("i", [resolve(links[2 * s]) for s in order])
        p2 = array("i", [resolve(links[2 * s + 1]) for s in order])
        for s, extra in more.items():
            index.more_parents[final[s]] = tuple(resolve(x) for x in extra)
        del links
        # the per-path lists the stream kept for partial answers, in final ids (ascending)
        at = final.__getitem__
        if all(map(operator.eq, order, range(count - 1, -1, -1))):  # git's order was topological: nothing to sort
            by_path = {pid: array("I", map(at, reversed(sids))) for pid, sids in self._by_path.items()}
        else:
            by_path = {pid: array("I", sorted(map(at, sids))) for pid, sids in self._by_path.items()}
        # copied commit by commit, never as one list of slices (a million slice objects at once: ~200 MB)
        hashes, subj, subj_off = self._hashes, self._subj, self._subj_off
        pids, kinds, ch_off = self._ch_pid, self._ch_kind, self._ch_off
        out_hashes, out_subj, out_subj_off = index.hashes, index.subj, index.subj_off
        out_pids, out_kinds, out_ch_off = index.ch_pid, index.ch_kind, index.ch_off
        for s in order:
            out_hashes += hashes[s * HASH : s * HASH + HASH]
            out_subj += subj[subj_off[s] : subj_off[s + 1]]
            out_subj_off.append(len(out_subj))
            a, b = ch_off[s], ch_off[s + 1]
            if b > a:
                out_pids.extend(pids[a:b])
                out_kinds += kinds[a:b]
            out_ch_off.append(len(out_pids))
        index.parent1.extend(p1)
        index.parent2.extend(p2)
        index.author.extend(array("I", [self._author[s] for s in order]))
        index.time.extend(array("q", [self._time[s] for s in order]))
        index._derive(base, by_path)
        if base == 0:  # the batch's lookup is the pool's, in final ids (no second sort of every hash)
            index._lookup.keys, index._lookup.ids = batch.keys, array("I", map(at, batch.ids))
            index._lookup.recent = {}
        elif count >= HashLookup.MERGE_AT:
            index._lookup.rebuild(index.hashes, len(index))
        else:
            for cid in range(base, len(index)):
                index._lookup.add(bytes(index.hashes[cid * HASH : cid * HASH + HASH]), cid, index.hashes)
        return list(range(base, len(index)))


def build_from_log(chunks: Iterable[bytes], head: str | None = None) -> RepoIndex:
    """A whole index from one `git log -z --name-status -M` stream (newest first) of `head`."""
    builder = IndexBuilder()
    builder.feed(chunks)
    builder.finish()
    index = builder.index
    if head is not None:
        index.checkout(View(head, None, len(index)))
    return index


def raw_commits(index: RepoIndex, ids: Iterable[int]) -> Iterator[RawCommit]:
    """Commits of an index back as parsed records (tests compare a streamed build with a commit-by-commit one)."""
    for cid in ids:
        changes: list[tuple[str, bytes, bytes | None]] = []
        k, end = index.ch_off[cid], index.ch_off[cid + 1]
        while k < end:
            pid, kind = index.ch_pid[k], index.ch_kind[k]
            if k + 1 < end and index.ch_kind[k + 1] in SOURCE_KINDS:
                changes.append((chr(kind), index.paths[pid], index.paths[index.ch_pid[k + 1]]))
                k += 2
            else:
                changes.append((chr(kind), index.paths[pid], None))
                k += 1
        name, email = index.people[index.author[cid]]
        yield RawCommit(
            index.hash_of(cid),
            tuple(index.hash_of(p) for p in index.parents_of(cid)),
            name,
            email,
            index.time[cid],
            index.subject_of(cid),
            tuple(changes),
        )


__all__ = [
    "CommitRef",
    "IndexBuilder",
    "Lineage",
    "Marks",
    "RepoIndex",
    "View",
    "build_from_log",
    "raw_commits",
]
