"""`nagent-lsp agents`, `nagent-lsp recipes` and `nagent-lsp recipe NAME FILE [request]` (DESIGN §10)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.headless.port import DiskPort
from nagent_lsp.operations.args import ListArgs, RecipeArgs


def run_agents(args: argparse.Namespace) -> int:
    def run() -> None:
        from nagent_lsp.operations.agents import list_agents

        session = session_for(args.folder.resolve())
        result = list_agents(session, ListArgs())
        if args.json:
            print_json(result)
            return
        width = max(len(a.name) for a in result.agents)
        for agent in result.agents:
            where = f"  ({agent.path})" if agent.path else ""
            shadowed = "  [shadowed: not used]" if agent.shadowed else ""
            print(f"{agent.name:<{width}}  {agent.source:<9}  {agent.description}{where}{shadowed}")
        _problems(result.problems)

    return run_guarded(run)


def run_recipes(args: argparse.Namespace) -> int:
    def run() -> None:
        from nagent_lsp.operations.recipes import list_recipes

        session = session_for(args.folder.resolve())
        result = list_recipes(session, ListArgs())
        if args.json:
            print_json(result)
            return
        if not result.recipes:
            print("No recipes: add ~/.nagent/recipes/NAME.yaml or .nagent/recipes/NAME.yaml.")
        for recipe in result.recipes:
            steps = " → ".join(f"{s.step} ({s.kind})" for s in recipe.steps)
            request = "  [needs a request]" if recipe.needsRequest else ""
            if recipe.shadowed:
                request += "  [shadowed by your own: not used]"
            elif not recipe.trusted and any(s.kind == "command" for s in recipe.steps):
                request += "  [untrusted: its commands run once you run `nagent-lsp trust`]"
            print(f"{recipe.name}  {recipe.source}  {recipe.description}{request}\n    {steps}")
        _problems(result.problems)

    return run_guarded(run)


def run_recipe(args: argparse.Namespace) -> int:
    async def run() -> None:
        from nagent_lsp.operations.recipes import run_recipe_command

        path = args.file.resolve()
        session = session_for(path)
        port = DiskPort(session.workspace_folders, quiet=args.json)
        arguments = RecipeArgs(uri=path.as_uri(), recipe=args.name, request=args.request, preview=bool(args.confirm))
        result = await run_recipe_command(session, port, arguments)
        if args.json:
            print_json(result)
            return
        if result.response:
            print(result.response)
        if result.patchPath:
            print(Path(result.patchPath).read_text(encoding="utf-8"), end="")
        if result.reason and result.reason != "no change":
            print(f"(recipe: {result.reason})", file=sys.stderr)
        print(f"conversation: {result.conversation.path}", file=sys.stderr)

    return run_guarded(run)


def _problems(problems: list[str]) -> None:
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
