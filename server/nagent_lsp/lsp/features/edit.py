"""`nagent.edit`."""

from __future__ import annotations

from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import EditArgs

# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run(ls: NagentServer, args: EditArgs) -> dict[str, Any]:
        from nagent_lsp.operations.edit import edit

        return await edit(ls.session, LspPort(ls), args)

    register_command(server, "nagent.edit", EditArgs, run)
