"""Parse the streamed `git log -z --name-status -M` output of adapters.git into plain commit records.

Record layout (see adapters.git.LOG_FORMAT): \\x01 header \\0 \\n then NUL-separated name-status fields:
`M\\0path\\0`, `A\\0path\\0`, `D\\0path\\0`, `R100\\0old\\0new\\0`, `C75\\0src\\0dst\\0`. A merge has no fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RawCommit:
    hash: str
    parents: tuple[str, ...]
    author: str
    email: str
    time: int
    subject: str
    # (status letter, path, old path or None); for R/C `path` is the new name
    changes: tuple[tuple[str, str, str | None], ...]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def parse_record(record: bytes) -> RawCommit | None:
    head, sep, rest = record.partition(b"\0")
    fields = head.split(b"\x1f", 5)
    if len(fields) != 6:
        return None
    sha, parents, author, email, when, subject = fields
    changes: list[tuple[str, str, str | None]] = []
    if sep:
        tokens = rest.split(b"\0")
        i, n = 0, len(tokens)
        while i < n:
            status = tokens[i].lstrip(b"\n")
            if not status:
                i += 1
                continue
            letter = chr(status[0])
            if letter in "RC":
                if i + 2 >= n:
                    break
                changes.append((letter, _decode(tokens[i + 2]), _decode(tokens[i + 1])))
                i += 3
            else:
                if i + 1 >= n:
                    break
                changes.append((letter, _decode(tokens[i + 1]), None))
                i += 2
    try:
        epoch = int(when)
    except ValueError:
        epoch = 0
    return RawCommit(
        sha.decode("ascii"),
        tuple(parents.decode("ascii").split()),
        _decode(author),
        _decode(email),
        epoch,
        _decode(subject),
        tuple(changes),
    )


def parse_log(chunks: Iterable[bytes]) -> Iterator[RawCommit]:
    """Commits in git's output order (newest first), parsed while the chunks still stream in."""
    tail = b""
    for chunk in chunks:
        data = tail + chunk
        parts = data.split(b"\x01")
        tail = parts.pop()
        for part in parts:
            if part:
                commit = parse_record(part)
                if commit is not None:
                    yield commit
    if tail:
        commit = parse_record(tail)
        if commit is not None:
            yield commit
