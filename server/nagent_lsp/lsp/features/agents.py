"""`nagent.agents.list`, `nagent.recipes.list`, `nagent.recipe.run` (DESIGN §4.1, §10) and the user's trust in a
repository's definitions: `nagent.trust.status`, `nagent.trust`, `nagent.trust.revoke` (DESIGN §12)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import ListArgs, RecipeArgs, TrustArgs, TrustStatusArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.agents import AgentList
    from nagent_lsp.operations.recipes import RecipeList, RecipeResult
    from nagent_lsp.operations.trust import TrustState

# Operations are imported when first used: start-up answers `initialize` without loading them.


def register(server: NagentServer) -> None:
    def agents(ls: NagentServer, args: ListArgs) -> AgentList:
        from nagent_lsp.operations.agents import list_agents

        return list_agents(ls.session, args)

    def recipes(ls: NagentServer, args: ListArgs) -> RecipeList:
        from nagent_lsp.operations.recipes import list_recipes

        return list_recipes(ls.session, args)

    async def run(ls: NagentServer, args: RecipeArgs) -> RecipeResult:
        from nagent_lsp.operations.recipes import run_recipe_command

        return await run_recipe_command(ls.session, LspPort(ls), args)

    register_command(server, "nagent.agents.list", ListArgs, agents)
    register_command(server, "nagent.recipes.list", ListArgs, recipes)

    def trust_status(ls: NagentServer, args: TrustStatusArgs) -> TrustState:
        from nagent_lsp.operations.trust import trust_status

        return trust_status(ls.session, args)

    def trust(ls: NagentServer, args: TrustArgs) -> TrustState:
        from nagent_lsp.operations.trust import trust_definitions

        return trust_definitions(ls.session, args)

    def revoke(ls: NagentServer, args: TrustStatusArgs) -> TrustState:
        from nagent_lsp.operations.trust import revoke_trust

        return revoke_trust(ls.session, args)

    register_command(server, "nagent.recipe.run", RecipeArgs, run)
    register_command(server, "nagent.trust.status", TrustStatusArgs, trust_status)
    register_command(server, "nagent.trust", TrustArgs, trust)
    register_command(server, "nagent.trust.revoke", TrustStatusArgs, revoke)
