"""`nagent.status`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import NoArgs

if TYPE_CHECKING:  # operations load lazily: start-up answers `initialize` without them
    from nagent_lsp.operations.status import ServerStatus


def register(server: NagentServer) -> None:
    def run(ls: NagentServer, args: NoArgs) -> ServerStatus:
        from nagent_lsp.operations.status import status

        return status(ls.session)

    register_command(server, "nagent.status", NoArgs, run)
