"""`nagent.split {uri, targetBytes?, natural?}` -> `{indexPath, splitType, sha256, segments[...]}`.

Splits what the user sees (the open buffer, unsaved edits included), else the file on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nagent_lsp.agent.splits import split_text
from nagent_lsp.config.args import file_argument
from nagent_lsp.core.errors import InvalidArgument, SplitError, UserError
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.operations.args import SplitArgs
from nagent_lsp.operations.buffers import read_source
from nagent_lsp.operations.session import Session
from nagent_lsp.text.split_rules import UnknownSplitType


def segments_result(index: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"index": s["segment_index"], "startLine": s["start_line_num"], "endLine": s["end_line_num"], "path": s["path"]}
        for s in index["segments"]
    ]


def split(session: Session, port: EditorPort | None, args: SplitArgs) -> dict[str, Any]:
    path = Path(os.path.abspath(file_argument(args.uri)))
    if args.targetBytes is not None and args.targetBytes <= 0:
        raise InvalidArgument("targetBytes", "must be a positive number of bytes")
    source = read_source(port, path)
    splits_dir = session.state_dir(path, "splits")
    kwargs: dict[str, Any] = {"natural": args.natural}
    if args.targetBytes is not None:
        kwargs["target_bytes"] = args.targetBytes
    try:
        result = split_text(source.text, path, splits_dir, **kwargs)
    except (SplitError, UnknownSplitType) as exc:
        raise UserError(str(exc)) from None
    index = result.index
    return {
        "indexPath": str(result.index_path),
        "splitType": index["split_type"],
        "sha256": index["source_sha256"],
        "segments": segments_result(index),
    }
