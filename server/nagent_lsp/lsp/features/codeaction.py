"""Code actions (the offers of operations/code_actions.py as LSP CodeActions) and `nagent.instruction.apply`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import InstructionArgs

KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Refactor]


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run(ls: NagentServer, args: InstructionArgs) -> dict[str, Any]:
        from nagent_lsp.operations.instruction import apply_instruction

        return await apply_instruction(ls.session, LspPort(ls), args)

    register_command(server, "nagent.instruction.apply", InstructionArgs, run)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS))
    def code_actions(ls: NagentServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        from nagent_lsp.operations.code_actions import offers

        uri, rng = params.text_document.uri, params.range
        path = to_fs_path(uri)
        if not path:
            return []
        lines = ls.workspace.get_text_document(uri).lines
        start, end = (rng.start.line, rng.start.character), (rng.end.line, rng.end.character)
        return [
            types.CodeAction(
                title=offer.title,
                kind=types.CodeActionKind(offer.kind),
                command=types.Command(title=offer.title, command=offer.command, arguments=[offer.argument]),
                is_preferred=offer.preferred or None,
            )
            for offer in offers(ls.session, uri, Path(path), lines, start, end)
        ]
