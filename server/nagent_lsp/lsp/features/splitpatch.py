"""`nagent.split`, `nagent.patch` and `nagent.summarize`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import PatchArgs, SplitArgs, UriArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.patch import PatchResult
    from nagent_lsp.operations.split import SplitResult
    from nagent_lsp.operations.summarize import SummaryResult

# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run_split(ls: NagentServer, args: SplitArgs) -> SplitResult:
        # The buffer is read from the server's document store on its own loop; the split runs in a worker thread.
        from nagent_lsp.operations.split import split_async

        return await split_async(ls.session, LspPort(ls), args)

    async def run_patch(ls: NagentServer, args: PatchArgs) -> PatchResult:
        from nagent_lsp.operations.patch import patch

        return await patch(ls.session, LspPort(ls), args)

    async def run_summarize(ls: NagentServer, args: UriArgs) -> SummaryResult:
        from nagent_lsp.operations.summarize import summarize

        return await summarize(ls.session, LspPort(ls), args)

    register_command(server, "nagent.split", SplitArgs, run_split)
    register_command(server, "nagent.patch", PatchArgs, run_patch)
    register_command(server, "nagent.summarize", UriArgs, run_summarize)
