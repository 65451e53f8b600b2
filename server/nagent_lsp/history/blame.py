"""`git blame --porcelain` output -> the commit that last changed each line; moving a blame across one commit with
that commit's diff (`.git-blame-ignore-revs` is history/ignore_revs.py).

A blame is kept compact (`Blame`: each distinct hash once, one small int per line), because the service keeps a
bounded number of them in memory and shares one between HEADs when the file did not change in between.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from dataclasses import dataclass

_HEADER = re.compile(rb"^([0-9a-f]{40}) (\d+) (\d+)(?: \d+)?$")
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Blame:
    shas: tuple[str, ...]  # distinct commits, in first-seen order
    lines: array  # per final line (index 0 = line 1): an index into `shas`

    def __len__(self) -> int:
        return len(self.lines)

    def at(self, line: int) -> str:
        """The commit of 1-based `line`, or "" past the end."""
        if not 1 <= line <= len(self.lines):
            return ""
        return self.shas[self.lines[line - 1]]

    @property
    def nbytes(self) -> int:
        """What it costs to keep, in bytes (the cache's budget unit): the per-line array, and each hash as a str
        (89 bytes) with its slot in the tuple."""
        return 120 + len(self.lines) * self.lines.itemsize + len(self.shas) * 97


def encode(path: bytes, head: str, newest: str | None, total: int, blame: Blame) -> bytes:
    """One blame as a frame of the blame cache file (store.history_index frames it): where it was made and for
    which state of the file's history, then its hashes (20 bytes each) and its per-line indexes."""
    meta = {
        "path": path.hex(),
        "head": head,
        "newest": newest,
        "total": total,
        "shas": len(blame.shas),
        "lines": len(blame.lines),
        "byteorder": sys.byteorder,
    }
    head_bytes = json.dumps(meta, separators=(",", ":")).encode("ascii")
    shas = b"".join(bytes.fromhex(sha) for sha in blame.shas)
    return len(head_bytes).to_bytes(4, "little") + head_bytes + shas + blame.lines.tobytes()


def decode(payload: bytes) -> tuple[bytes, str, str | None, int, Blame]:
    """(path, head, newest, total, blame) of one frame; ValueError when it does not hold together."""
    size = int.from_bytes(payload[:4], "little")
    meta = json.loads(payload[4 : 4 + size])
    if not isinstance(meta, dict):
        raise ValueError("bad blame frame")
    count, lines = int(meta["shas"]), int(meta["lines"])
    body = payload[4 + size :]
    if count < 0 or lines < 0 or len(body) != 20 * count + 4 * lines:
        raise ValueError("truncated blame frame")
    shas = tuple(body[i * 20 : i * 20 + 20].hex() for i in range(count))
    per_line = array("I")
    per_line.frombytes(body[20 * count :])
    if meta.get("byteorder") != sys.byteorder:
        per_line.byteswap()
    if per_line and max(per_line) >= count:
        raise ValueError("blame frame refers to unknown commits")
    newest = meta.get("newest")
    head = meta["head"]
    if not isinstance(head, str) or not (newest is None or isinstance(newest, str)):
        raise ValueError("bad blame frame")
    return bytes.fromhex(meta["path"]), head, newest, int(meta["total"]), Blame(shas, per_line)


def compact(per_line: list[str]) -> Blame:
    ids: dict[str, int] = {}
    lines = array("I", (ids.setdefault(sha, len(ids)) for sha in per_line))
    return Blame(tuple(ids), lines)


def parse_porcelain(data: bytes) -> list[str]:
    """Commit hash per final line, index 0 = line 1."""
    lines: dict[int, str] = {}
    for raw in data.split(b"\n"):
        if not raw or raw[:1] == b"\t":
            continue
        match = _HEADER.match(raw)
        if match:
            lines[int(match.group(3))] = match.group(1).decode("ascii")
    if not lines:
        return []
    size = max(lines)
    return [lines.get(i, "") for i in range(1, size + 1)]


def parse_hunks(diff: bytes) -> list[tuple[int, int, int, int]]:
    """(old start, old count, new start, new count) of each hunk of a `git diff -U0` (line numbers 1-based; a count
    of 0 means the start is the line before the insertion or deletion point)."""
    out = []
    for raw in diff.split(b"\n"):
        match = _HUNK.match(raw)
        if match:
            a, b, c, d = match.groups()
            out.append((int(a), 1 if b is None else int(b), int(c), 1 if d is None else int(d)))
    return out


def advance(old: Blame, hunks: list[tuple[int, int, int, int]], sha: str) -> Blame:
    """The blame after one commit `sha` whose diff of the file is `hunks`: lines it added or rewrote are its own,
    every other line keeps the commit it had."""
    shas = list(old.shas)
    try:
        mine = shas.index(sha)
    except ValueError:
        mine = len(shas)
        shas.append(sha)
    lines = array("I")
    cursor = 0  # next old line (0-based) not yet copied
    for old_start, old_count, _new_start, new_count in hunks:
        keep_until = old_start - 1 if old_count else old_start  # 0-based end of the unchanged run before the hunk
        lines.extend(old.lines[cursor:keep_until])
        lines.extend(array("I", [mine]) * new_count)
        cursor = keep_until + old_count
    lines.extend(old.lines[cursor:])
    return Blame(tuple(shas), lines)
