"""`nagent.edit`."""

from __future__ import annotations

from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.operations.edit import edit


def register(server: Any) -> None:
    async def run(ls: Any, raw: Any) -> dict[str, Any]:
        return await edit(ls.session, LspPort(ls), raw)

    register_command(server, "nagent.edit", run)
