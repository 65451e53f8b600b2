"""Parse the streamed `git log -z --name-status -M` output of history.git into plain commit records.

Record layout (see history.git.LOG_FORMAT): \\x01 header \\0 \\n then NUL-separated name-status fields:
`M\\0path\\0`, `A\\0path\\0`, `D\\0path\\0`, `R100\\0old\\0new\\0`, `C75\\0src\\0dst\\0`. A merge has no fields.

Names, e-mails, subjects and paths stay bytes (history.encoding says why); only the hashes, which are ASCII, become
text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple


class RawCommit(NamedTuple):  # a NamedTuple, not a dataclass: the CLI's cold `history` never imports dataclasses
    hash: str
    parents: tuple[str, ...]
    author: bytes
    email: bytes
    time: int
    subject: bytes
    # (status letter, path, old path or None); for R/C `path` is the new name
    changes: tuple[tuple[str, bytes, bytes | None], ...]


def parse_changes(rest: bytes) -> list[tuple[str, bytes, bytes | None]]:
    """The name-status fields after a record's header."""
    changes: list[tuple[str, bytes, bytes | None]] = []
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
            changes.append((letter, tokens[i + 2], tokens[i + 1]))
            i += 3
        else:
            if i + 1 >= n:
                break
            changes.append((letter, tokens[i + 1], None))
            i += 2
    return changes


def parse_record(record: bytes) -> RawCommit | None:
    head, sep, rest = record.partition(b"\0")
    fields = head.split(b"\x1f", 5)
    if len(fields) != 6:
        return None
    sha, parents, author, email, when, subject = fields
    try:
        epoch = int(when)
    except ValueError:
        epoch = 0
    try:
        hexsha = sha.decode("ascii")
        parent_hashes = tuple(parents.decode("ascii").split())
    except UnicodeDecodeError:
        return None
    return RawCommit(hexsha, parent_hashes, author, email, epoch, subject, tuple(parse_changes(rest)) if sep else ())


def split_records(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The raw records of a streamed log, yielded as soon as each is complete."""
    tail = b""
    for chunk in chunks:
        parts = (tail + chunk).split(b"\x01")
        tail = parts.pop()
        for part in parts:
            if part:
                yield part
    if tail:
        yield tail


def parse_log(chunks: Iterable[bytes]) -> Iterator[RawCommit]:
    """Commits in git's output order (newest first), parsed while the chunks still stream in."""
    for part in split_records(chunks):
        commit = parse_record(part)
        if commit is not None:
            yield commit
