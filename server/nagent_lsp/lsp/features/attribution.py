"""`nagent.attribution.at` (contract C: who wrote a line) and the saves that move the attribution ledger's tracks
(operations/attribution.py); the hover card's line is added where the card is built (operations/history.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import AttributionArgs  # light: the operation itself loads at the first call

if TYPE_CHECKING:
    from nagent_lsp.operations.attribution import AttributionResult

log = logging.getLogger("nagent_lsp")


def register(server: NagentServer) -> None:
    async def run_at(ls: NagentServer, args: AttributionArgs) -> AttributionResult:
        from nagent_lsp.operations import attribution

        path = uri_to_path(args.uri)
        buffer = LspPort(ls).read_buffer(path) if path is not None else None
        text = buffer.text if buffer is not None else None
        return await asyncio.to_thread(attribution.attribution_at, ls.session, args, text)

    register_command(server, "nagent.attribution.at", AttributionArgs, run_at)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(ls: NagentServer, params: types.DidSaveTextDocumentParams) -> None:
        path = uri_to_path(params.text_document.uri)
        buffer = LspPort(ls).read_buffer(path) if path is not None else None
        if path is None or buffer is None:
            return
        from nagent_lsp.operations import attribution

        try:
            await asyncio.to_thread(attribution.observed, ls.session, path, buffer.text)
        except Exception as exc:  # noqa: BLE001 - a save must never fail over attribution
            log.info("attribution: the save of %s not followed: %s", path, exc)
