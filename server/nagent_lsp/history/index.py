"""Repository index: every commit with the files it changed, queried per file from memory.

Commits get ascending ids in history order (oldest first), so an incremental update only appends and "older than
commit c" is `id < c`. Paths and authors are interned. Rename records (old -> new) let a file's history continue
under its former names (like `--follow`, but for any file at once and without a process), and let co-edited partner
names be carried forward to the name they have now.

The index is plain data; persistence is JSON (never pickle: the cache folder lives inside a repository a stranger may
have prepared).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from nagent_lsp.history.logparse import RawCommit

FORMAT_VERSION = 1
MAX_RENAME_HOPS = 64


@dataclass(frozen=True, slots=True)
class CommitRef:
    """One commit of a file's history, with the name the file had in it."""

    id: int
    hash: str
    author: str
    email: str
    time: int
    subject: str
    path: str


@dataclass(frozen=True)
class Lineage:
    path: str
    commits: tuple[CommitRef, ...]  # newest first
    names: frozenset[str]  # the current name and every former name reached
    complete: bool  # False when cut at a limit (there may be older commits)


class RepoIndex:
    def __init__(self) -> None:
        self.head: str | None = None
        self.paths: list[str] = []
        self.path_ids: dict[str, int] = {}
        self.people: list[tuple[str, str]] = []
        self.people_ids: dict[tuple[str, str], int] = {}
        self.hashes: list[str] = []
        self.hash_ids: dict[str, int] = {}
        self.author: list[int] = []
        self.time: list[int] = []
        self.subject: list[str] = []
        self.merge: list[bool] = []
        self.changes: list[tuple[int, ...]] = []  # path ids touched (new names; deleted paths too)
        self.by_path: dict[int, list[int]] = {}  # path id -> ascending commit ids
        self.renames_into: dict[int, list[tuple[int, int]]] = {}  # new pid -> [(commit id, old pid)] ascending
        self.renames_from: dict[int, list[tuple[int, int]]] = {}  # old pid -> [(commit id, new pid)] ascending
        self.dead: set[int] = set()  # paths whose last change deleted or renamed them away

    # -- building ------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.hashes)

    def _pid(self, path: str) -> int:
        pid = self.path_ids.get(path)
        if pid is None:
            pid = self.path_ids[path] = len(self.paths)
            self.paths.append(path)
        return pid

    def _person(self, name: str, email: str) -> int:
        key = (name, email)
        aid = self.people_ids.get(key)
        if aid is None:
            aid = self.people_ids[key] = len(self.people)
            self.people.append(key)
        return aid

    def append(self, commit: RawCommit) -> int:
        """Add one commit that is newer than every commit already here (or the first). Returns its id."""
        existing = self.hash_ids.get(commit.hash)
        if existing is not None:
            return existing
        cid = len(self.hashes)
        self.hashes.append(commit.hash)
        self.hash_ids[commit.hash] = cid
        self.author.append(self._person(commit.author, commit.email))
        self.time.append(commit.time)
        self.subject.append(commit.subject)
        self.merge.append(len(commit.parents) > 1)
        touched: list[int] = []
        for status, path, old in commit.changes:
            pid = self._pid(path)
            touched.append(pid)
            self.by_path.setdefault(pid, []).append(cid)
            if status == "D":
                self.dead.add(pid)
            else:
                self.dead.discard(pid)
            if status == "R" and old is not None:
                oid = self._pid(old)
                self.renames_into.setdefault(pid, []).append((cid, oid))
                self.renames_from.setdefault(oid, []).append((cid, pid))
                self.dead.add(oid)
        self.changes.append(tuple(touched))
        return cid

    @classmethod
    def from_log_stream(cls, chunks: Iterable[bytes]) -> RepoIndex:
        """Build from the raw `git log -z --name-status -M` stream (newest first) while it streams in.

        The hot path of a cold build: bytes are interned without decoding repeats, and ids are assigned in stream
        order (newest = 0) then flipped once at the end, so no second pass over parsed objects is needed. Must give
        exactly what `extend_newest_first(parse_log(...))` gives (a test checks it)."""
        index = cls()
        pids: dict[bytes, int] = {}
        people: dict[bytes, int] = {}
        paths, hashes, author, time, subject, merge, changes = (
            index.paths,
            index.hashes,
            index.author,
            index.time,
            index.subject,
            index.merge,
            index.changes,
        )
        by_path: dict[int, list[int]] = {}
        renames: list[tuple[int, int, int]] = []  # (stream cid, old pid, new pid)
        dead = index.dead

        def intern(raw: bytes) -> tuple[int, bool]:
            pid = pids.get(raw)
            if pid is not None:
                return pid, False
            pid = pids[raw] = len(paths)
            paths.append(raw.decode("utf-8", "surrogateescape"))
            return pid, True

        def ingest(record: bytes) -> None:
            head, sep, rest = record.partition(b"\0")
            fields = head.split(b"\x1f", 5)
            if len(fields) != 6:
                return
            cid = len(hashes)
            hashes.append(fields[0].decode("ascii"))
            key = fields[2] + b"\x1f" + fields[3]
            aid = people.get(key)
            if aid is None:
                aid = people[key] = len(index.people)
                index.people.append(
                    (fields[2].decode("utf-8", "surrogateescape"), fields[3].decode("utf-8", "surrogateescape"))
                )
            author.append(aid)
            try:
                time.append(int(fields[4]))
            except ValueError:
                time.append(0)
            subject.append(fields[5].decode("utf-8", "surrogateescape"))
            merge.append(b" " in fields[1])
            touched: list[int] = []
            if sep and len(rest) > 1:
                tokens = rest[1:].split(b"\0") if rest[:1] == b"\n" else rest.split(b"\0")
                n = len(tokens) - 1
                i = 0
                while i < n:
                    status = tokens[i][:1]
                    if status == b"R" or status == b"C":
                        if i + 2 > n:
                            break
                        pid, first = intern(tokens[i + 2])
                        if status == b"R":
                            oid, ofirst = intern(tokens[i + 1])
                            renames.append((cid, oid, pid))
                            if ofirst:  # newest first: the first sighting is the latest state
                                dead.add(oid)
                        i += 3
                    else:
                        if i + 1 > n:
                            break
                        pid, first = intern(tokens[i + 1])
                        if first and status == b"D":
                            dead.add(pid)
                        i += 2
                    touched.append(pid)
                    lst = by_path.get(pid)
                    if lst is None:
                        by_path[pid] = [cid]
                    else:
                        lst.append(cid)
            changes.append(tuple(touched))

        tail = b""
        for chunk in chunks:
            parts = (tail + chunk).split(b"\x01")
            tail = parts.pop()
            for part in parts:
                if part:
                    ingest(part)
        if tail:
            ingest(tail)
        # flip to ascending ids (oldest = 0)
        last = len(hashes) - 1
        for seq in (hashes, author, time, subject, merge, changes):
            seq.reverse()
        index.hash_ids = {h: i for i, h in enumerate(hashes)}
        index.by_path = {pid: [last - c for c in reversed(ids)] for pid, ids in by_path.items()}
        for cid, oid, pid in reversed(renames):
            index.renames_into.setdefault(pid, []).append((last - cid, oid))
            index.renames_from.setdefault(oid, []).append((last - cid, pid))
        index.path_ids = {p: i for i, p in enumerate(paths)}
        index.people_ids = {p: i for i, p in enumerate(index.people)}
        return index

    def extend_newest_first(self, commits: Iterable[RawCommit]) -> int:
        """Append a batch given in git's order (newest first). Returns how many were new."""
        batch = list(commits)
        before = len(self.hashes)
        for commit in reversed(batch):
            self.append(commit)
        return len(self.hashes) - before

    # -- queries -------------------------------------------------------------------------------------------------
    def ref(self, cid: int, path: str) -> CommitRef:
        name, email = self.people[self.author[cid]]
        return CommitRef(cid, self.hashes[cid], name, email, self.time[cid], self.subject[cid], path)

    def lineage(self, path: str, limit: int | None = None) -> Lineage:
        """The file's commits newest first, following renames backwards; stops after `limit` commits."""
        out: list[CommitRef] = []
        names: set[str] = {path}
        pid = self.path_ids.get(path)
        upper = len(self.hashes)
        hops = 0
        complete = True
        while pid is not None and hops < MAX_RENAME_HOPS:
            hops += 1
            ids = self.by_path.get(pid, [])
            renames = self.renames_into.get(pid, [])
            # the newest rename into this name that happened below `upper` ends this name's segment
            k = bisect_left(renames, (upper, -1)) - 1
            floor_id, old = renames[k] if k >= 0 else (-1, None)
            name = self.paths[pid]
            hi = bisect_left(ids, upper)
            lo = bisect_left(ids, floor_id) if floor_id >= 0 else 0
            for i in range(hi - 1, lo - 1, -1):
                out.append(self.ref(ids[i], name))
                if limit is not None and len(out) >= limit:
                    complete = i == lo and old is None
                    return Lineage(path, tuple(out), frozenset(names), complete)
            if old is None:
                break
            names.add(self.paths[old])
            pid, upper = old, floor_id
        return Lineage(path, tuple(out), frozenset(names), complete)

    def canonical(self, pid: int, cid: int) -> int:
        """The name path `pid` (as seen in commit `cid`) has now, following later renames forward."""
        hops = 0
        while hops < MAX_RENAME_HOPS:
            moves = self.renames_from.get(pid)
            if not moves:
                return pid
            k = bisect_left(moves, (cid + 1, -1))
            if k >= len(moves):
                return pid
            cid, pid = moves[k]
            hops += 1
        return pid

    # -- persistence ---------------------------------------------------------------------------------------------
    def to_json(self, extra: dict | None = None) -> bytes:
        data = {
            "version": FORMAT_VERSION,
            "head": self.head,
            "paths": self.paths,
            "people": self.people,
            "hashes": self.hashes,
            "author": self.author,
            "time": self.time,
            "subject": self.subject,
            "merge": [i for i, m in enumerate(self.merge) if m],
            "changes": self.changes,
            "renames": [[cid, old, new] for new, moves in self.renames_into.items() for cid, old in moves],
            "dead": sorted(self.dead),
        }
        if extra:
            data["extra"] = extra  # type: ignore[assignment]  # free-form metadata beside the columns
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> RepoIndex:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError("unknown history index format")
        index = cls()
        index.head = data["head"]
        index.paths = list(data["paths"])
        index.path_ids = {p: i for i, p in enumerate(index.paths)}
        index.people = [tuple(p) for p in data["people"]]
        index.people_ids = {p: i for i, p in enumerate(index.people)}
        index.hashes = list(data["hashes"])
        index.hash_ids = {h: i for i, h in enumerate(index.hashes)}
        index.author = list(data["author"])
        index.time = list(data["time"])
        index.subject = list(data["subject"])
        n = len(index.hashes)
        if not (len(index.author) == len(index.time) == len(index.subject) == len(data["changes"]) == n):
            raise ValueError("inconsistent history index")
        index.merge = [False] * n
        for i in data["merge"]:
            index.merge[i] = True
        index.changes = [tuple(c) for c in data["changes"]]
        by_path: dict[int, list[int]] = {}
        for cid, touched in enumerate(index.changes):
            for pid in touched:
                by_path.setdefault(pid, []).append(cid)
        index.by_path = by_path
        for cid, old, new in sorted(data["renames"]):
            index.renames_into.setdefault(new, []).append((cid, old))
            index.renames_from.setdefault(old, []).append((cid, new))
        index.dead = set(data["dead"])
        return index
