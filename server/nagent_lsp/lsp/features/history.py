"""textDocument/hover (the history card), `nagent.history` and `nagent.coedits`, and the history index's build
progress as `$/progress`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.core.ports import Progress
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs

if TYPE_CHECKING:
    from nagent_lsp.history.service import HistoryEvent, HistoryService
    from nagent_lsp.operations.history import Coedits, FileHistory

log = logging.getLogger("nagent_lsp")


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: NagentServer, params: types.HoverParams) -> types.Hover | None:
        started = time.monotonic()
        path = uri_to_path(params.text_document.uri)  # the path's exact bytes, UTF-8 or not
        if path is None:
            return None
        from nagent_lsp.operations import history

        line = params.position.line + 1
        buffer = LspPort(ls).read_buffer(path)  # the user's text: lines are mapped through their unsaved edits
        source = buffer.text if buffer is not None else None
        try:
            # warm answers are memory lookups; a thread keeps a cold first query's git call off the event loop
            text = await asyncio.to_thread(history.hover_markdown, ls.session, path, line, started=started, text=source)
        except Exception:  # noqa: BLE001 - a hover must never turn into an error popup
            log.exception("history hover failed for %s", path)
            return None
        if not text:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def on_open(ls: NagentServer, params: types.DidOpenTextDocumentParams) -> None:
        # pygls has stored the document already; this only warms history for the first hover, in a thread
        path = uri_to_path(params.text_document.uri)
        if path is not None:
            asyncio.get_running_loop().run_in_executor(None, _warm, ls, path)
        from nagent_lsp.lsp.features.review import show_pending

        await show_pending(ls, params.text_document.uri)  # a pending proposal's hunks (they survive a restart)

    def run_history(ls: NagentServer, args: HistoryArgs) -> FileHistory:
        from nagent_lsp.operations import history

        return history.history_result(ls.session, args)

    def run_coedits(ls: NagentServer, args: CoeditsArgs) -> Coedits:
        from nagent_lsp.operations import history

        return history.coedits_result(ls.session, args)

    register_command(server, "nagent.history", HistoryArgs, run_history)
    register_command(server, "nagent.coedits", CoeditsArgs, run_coedits)
    server.session.history_listeners.append(BuildProgress(server))


def _warm(ls: NagentServer, path: Path) -> None:
    from nagent_lsp.operations import history

    try:
        history.warm(ls.session, path)
    except Exception as exc:  # noqa: BLE001 - warming is a courtesy: the hover will try again and report
        log.debug("history warm-up for %s failed: %s", path, exc)


class BuildProgress:
    """A history service's build events (from its worker threads) as one `$/progress` per build: begin, reports,
    end, in order, through the event loop. Nothing is sent to a client without work-done progress support."""

    def __init__(self, server: NagentServer):
        self.server = server
        self.port = LspPort(server)
        self.chains: dict[int, asyncio.Future[None]] = {}  # per service: the last event's task (events stay in order)
        self.shown: dict[int, Progress] = {}

    def __call__(self, service: HistoryService, event: HistoryEvent) -> None:
        loop = self.server.loop
        if loop is None or loop.is_closed() or not self.server.client_ready:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: shutting down
            loop.call_soon_threadsafe(self._chain, id(service), event)

    def _chain(self, key: int, event: HistoryEvent) -> None:
        previous = self.chains.get(key)
        self.chains[key] = asyncio.ensure_future(self._show(previous, key, event))

    async def _show(self, previous: asyncio.Future[None] | None, key: int, event: HistoryEvent) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous
        try:
            progress = self.shown.get(key)
            if event.kind in ("begin", "report") and progress is None:
                progress = self.shown[key] = await self.port.begin_progress(event.title, cancellable=False)
            if progress is None:
                return
            if event.kind == "report":
                self.port.report_progress(progress, event.message)
            elif event.kind == "end":
                del self.shown[key]
                self.port.end_progress(progress, event.message)
        except Exception as exc:  # noqa: BLE001 - progress is a courtesy; history works without it
            log.debug("history progress not shown: %s", exc)
