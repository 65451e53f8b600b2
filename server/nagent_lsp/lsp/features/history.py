"""textDocument/hover (the history card), `nagent.history` and `nagent.coedits`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.operations import history
from nagent_lsp.config.args import file_argument, parse_args

log = logging.getLogger("nagent_lsp")


@dataclass(frozen=True)
class HistoryArgs:
    uri: str
    maxCommits: int | None = None


@dataclass(frozen=True)
class CoeditsArgs:
    uri: str
    limit: int | None = None


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: Any, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        if not uri.startswith("file:"):
            return None
        path = Path(to_fs_path(uri))
        line = params.position.line + 1
        try:
            # warm answers are memory lookups; a thread keeps a cold first query's git call off the event loop
            text = await asyncio.to_thread(history.hover_markdown, ls.session, path, line)
        except Exception:  # noqa: BLE001 - a hover must never turn into an error popup
            log.exception("history hover failed for %s", path)
            return None
        if not text:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    def run_history(ls: Any, raw: Any) -> dict[str, Any]:
        args = parse_args(HistoryArgs, raw)
        return history.history_result(ls.session, file_argument(args.uri), args.maxCommits)

    def run_coedits(ls: Any, raw: Any) -> dict[str, Any]:
        args = parse_args(CoeditsArgs, raw)
        return history.coedits_result(ls.session, file_argument(args.uri), args.limit)

    register_command(server, "nagent.history", run_history)
    register_command(server, "nagent.coedits", run_coedits)
