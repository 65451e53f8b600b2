"""`nagent.split {uri, targetBytes?, natural?}` -> `{indexPath, splitType, sha256, segments[...]}`.

Splits what the user sees (the open buffer, unsaved edits included), else the file on disk — only a file the
read rules allow (inside the workspace, no denyRead match, a regular file of at most maxFileBytes), so nothing
outside the workspace is ever copied into a split and no state root is created for it. In the editor the read
and the split run in a worker thread (`split_async`): splitting megabytes must not hold up hovers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import ReadRules
from nagent_lsp.agent.splits import split_text
from nagent_lsp.core.errors import InvalidArgument, SplitError, UserError
from nagent_lsp.core.ports import Buffer, EditorPort
from nagent_lsp.operations.args import SplitArgs
from nagent_lsp.operations.buffers import confined_file, source_from
from nagent_lsp.operations.session import Session
from nagent_lsp.text.segments import TARGET_BYTES_DEFAULT
from nagent_lsp.text.split_rules import UnknownSplitType


@attrs.frozen
class Segment:
    """One segment file: its 1-based position, the source lines it holds (1-based, inclusive) and its path."""

    index: int
    startLine: int
    endLine: int
    path: str


@attrs.frozen
class SplitResult:
    """The `nagent.split` result: the index file to give `nagent.patch`, the split rules used, the source's hash."""

    indexPath: str
    splitType: str
    sha256: str
    segments: list[Segment]


def _checked(session: Session, args: SplitArgs) -> tuple[Path, ReadRules]:
    if args.targetBytes is not None and args.targetBytes <= 0:
        raise InvalidArgument("targetBytes", "must be a positive number of bytes")
    return confined_file(session, args.uri)


def split(session: Session, port: EditorPort | None, args: SplitArgs) -> SplitResult:
    """The split, done in the calling thread (the CLI, tests, a worker thread)."""
    path, rules = _checked(session, args)
    buffer = port.read_buffer(path) if port is not None else None
    return _split(session, path, rules, buffer, args)


async def split_async(session: Session, port: EditorPort | None, args: SplitArgs) -> SplitResult:
    """The split for the editor: the buffer is taken on the event loop, the rest runs in a worker thread."""
    path, rules = _checked(session, args)
    buffer = port.read_buffer(path) if port is not None else None
    return await asyncio.to_thread(_split, session, path, rules, buffer, args)


def _split(session: Session, path: Path, rules: ReadRules, buffer: Buffer | None, args: SplitArgs) -> SplitResult:
    source = source_from(path, buffer, rules)
    splits_dir = session.state_dir(path, "splits")
    target = args.targetBytes if args.targetBytes is not None else TARGET_BYTES_DEFAULT
    try:
        result = split_text(source.text, path, splits_dir, target_bytes=target, natural=args.natural)
    except (SplitError, UnknownSplitType) as exc:
        raise UserError(str(exc)) from None
    index = result.index  # the index as written (store/splits.py), read back only from a trusted split
    return SplitResult(
        indexPath=str(result.index_path),
        splitType=index["split_type"],
        sha256=index["source_sha256"],
        segments=[
            Segment(s["segment_index"], s["start_line_num"], s["end_line_num"], s["path"]) for s in index["segments"]
        ],
    )
