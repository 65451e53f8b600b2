"""`nagent.edit`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import EditArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.edit import EditResult

# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run(ls: NagentServer, args: EditArgs) -> EditResult:
        from nagent_lsp.operations.edit import edit

        return await edit(ls.session, LspPort(ls), args)

    register_command(server, "nagent.edit", EditArgs, run)

    # Issue 25: background commit summaries ask the user before diffs leave the machine, through this client.
    from nagent_lsp.operations.summary_consent import set_asker

    set_asker(server.session, lambda message, choices: LspPort(server).ask_blocking(message, choices))
