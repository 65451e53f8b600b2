"""Code actions (the offers of operations/code_actions.py as LSP CodeActions) and `nagent.instruction.apply`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.features import codeaction_show, coupling
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import InstructionArgs

if TYPE_CHECKING:  # operations load lazily: start-up answers `initialize` without them
    from nagent_lsp.operations.deliver import RunResult

KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Refactor]


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run(ls: NagentServer, args: InstructionArgs) -> RunResult:
        from nagent_lsp.operations.instruction import apply_instruction

        return await apply_instruction(ls.session, LspPort(ls), args)

    register_command(server, "nagent.instruction.apply", InstructionArgs, run)
    codeaction_show.register(server)  # nagent.codeAction.run: results shown to clients without a plugin

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS))
    async def code_actions(ls: NagentServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        from nagent_lsp.operations.code_actions import offers

        uri, rng = params.text_document.uri, params.range
        path = uri_to_path(uri)
        if path is None or "\x00" in str(path):
            return []
        # Only an open document's lines: pygls would read an unopened one from disk, whatever it is (/dev/zero).
        document = ls.workspace.text_documents.get(uri)
        lines = list(document.lines) if document is not None else []
        start, end = (rng.start.line, rng.start.character), (rng.end.line, rng.end.character)
        # The offers stat files and load split indexes: a worker thread keeps that off the event loop.
        found = await asyncio.to_thread(offers, ls.session, uri, path, lines, start, end)
        found = codeaction_show.adapt_offers(ls.client_capabilities, found)  # what a client without a plugin gets
        found = coupling.offers(ls, uri, start[0], end[0]) + found  # issue 26: include a hinted partner, …
        return [
            types.CodeAction(
                title=offer.title,
                kind=types.CodeActionKind(offer.kind),
                command=types.Command(title=offer.title, command=offer.command, arguments=[offer.argument]),
                is_preferred=offer.preferred or None,
            )
            for offer in found
        ]
