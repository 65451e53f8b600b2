"""textDocument/hover (the history card), `nagent.history` and `nagent.coedits`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs

log = logging.getLogger("nagent_lsp")


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: NagentServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        fs_path = to_fs_path(uri) if uri.startswith("file:") else None
        if not fs_path:
            return None
        from nagent_lsp.operations import history

        path = Path(fs_path)
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

    def run_history(ls: NagentServer, args: HistoryArgs) -> dict[str, Any]:
        from nagent_lsp.operations import history

        return history.history_result(ls.session, args)

    def run_coedits(ls: NagentServer, args: CoeditsArgs) -> dict[str, Any]:
        from nagent_lsp.operations import history

        return history.coedits_result(ls.session, args)

    register_command(server, "nagent.history", HistoryArgs, run_history)
    register_command(server, "nagent.coedits", CoeditsArgs, run_coedits)
