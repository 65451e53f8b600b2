"""`nagent.agents.list`, `nagent.recipes.list` and `nagent.recipe.run` (DESIGN §4.1, §10)."""

from __future__ import annotations

from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import ListArgs, RecipeArgs

# Operations are imported when first used: start-up answers `initialize` without loading them.


def register(server: NagentServer) -> None:
    def agents(ls: NagentServer, args: ListArgs) -> dict[str, Any]:
        from nagent_lsp.operations.agents import list_agents

        return list_agents(ls.session, args)

    def recipes(ls: NagentServer, args: ListArgs) -> dict[str, Any]:
        from nagent_lsp.operations.recipes import list_recipes

        return list_recipes(ls.session, args)

    async def run(ls: NagentServer, args: RecipeArgs) -> dict[str, Any]:
        from nagent_lsp.operations.recipes import run_recipe_command

        return await run_recipe_command(ls.session, LspPort(ls), args)

    register_command(server, "nagent.agents.list", ListArgs, agents)
    register_command(server, "nagent.recipes.list", ListArgs, recipes)
    register_command(server, "nagent.recipe.run", RecipeArgs, run)
