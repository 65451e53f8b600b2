"""Command line: the language server (default) and headless runs of the same operations.

The table below is the whole CLI: each subcommand's help, its arguments, and the function that runs it,
named as "module:function" and imported only when that subcommand runs, so `--version`, `status` and
`history` never pay for importing the model SDK or the LSP types they do not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from nagent_lsp import __version__

if TYPE_CHECKING:
    import argparse  # imported by build_parser: `history FILE` starts git before it (headless/history_early.py)


def _file(parser: argparse.ArgumentParser, json_help: str | None = None) -> None:
    parser.add_argument("file", type=Path)
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)


def _history_args(parser: argparse.ArgumentParser) -> None:
    _file(parser)
    parser.add_argument("--max-commits", type=int, default=None, help="look at this many recent commits")
    parser.add_argument("--json", action="store_true", help="print the nagent.history result as JSON")


def _coedit_args(parser: argparse.ArgumentParser) -> None:
    _file(parser)
    parser.add_argument("--limit", type=int, default=None, help="rows to show (default 20)")
    parser.add_argument("--json", action="store_true", help="print the nagent.coedits result as JSON")


def _split_args(parser: argparse.ArgumentParser) -> None:
    _file(parser)
    parser.add_argument("--target-bytes", type=int, default=None, help="segment size to aim for (default 32768)")
    parser.add_argument("--natural", action="store_true", help="cut at every natural boundary")


def _patch_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index", type=Path, help="the split's index.json")
    parser.add_argument("--force", action="store_true", help="patch even if the file changed since the split")
    parser.add_argument("--dry-run", action="store_true", help="write the diff, change nothing")


def _edit_args(parser: argparse.ArgumentParser) -> None:
    _file(parser)
    parser.add_argument("request", help="what to change")
    parser.add_argument(
        "--review",
        "--confirm",
        dest="review",
        action="store_true",
        help="show the change as a proposal and ask per hunk (y/n/a/q); without a terminal it stays pending",
    )
    parser.add_argument("--agent", default=None, help="the agent to run as (see `nagent-lsp agents`)")
    parser.add_argument("--profile", default=None, help="a model profile (setting models) for this request only")
    parser.add_argument("--json", action="store_true", help="print the nagent.edit result as JSON")


def _list_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--folder", type=Path, default=Path.cwd(), help="workspace folder (default: current directory)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _recipe_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the recipe (see `nagent-lsp recipes`)")
    _file(parser)
    parser.add_argument("request", nargs="?", default=None, help="the request (the recipe's userRequest)")
    parser.add_argument("--confirm", action="store_true", help="keep a changed file as a proposal to review")
    parser.add_argument("--json", action="store_true", help="print the nagent.recipe.run result as JSON")


def _review_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "show", "apply", "discard"])
    parser.add_argument("id", nargs="?", help="the proposal id (from `review list` or the edit's result)")
    parser.add_argument("--accept", help="apply only these hunks, comma-separated (h1,h3); the rest are rejected")


def _context_args(parser: argparse.ArgumentParser) -> None:
    _file(parser, "print the layers as JSON")
    parser.add_argument("--full", action="store_true", help="print each layer's text too")


def _conversations_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["check"], help="check: find secrets in the conversations")
    parser.add_argument(
        "path", nargs="?", type=Path, default=None, help="a file or folder of the repository (default: current folder)"
    )
    parser.add_argument("--fix", action="store_true", help="redact what is found, in place (atomic rewrite)")


def _status_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--folder", type=Path, default=Path.cwd(), help="workspace folder (default: current directory)")


def _summaries_args(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, what in (("fetch", "fetch the remote's summaries and merge them in"), ("push", "push ours (merged)")):
        sub = actions.add_parser(name, help=f"git notes refs/notes/nagent-summaries: {what}")
        sub.add_argument("remote", nargs="?", default="origin", help="the git remote (default origin)")
    warm = actions.add_parser("warm", help="summarise the files' recent commits now (states the cost, asks first)")
    warm.add_argument("files", type=Path, nargs="+", metavar="FILE")
    warm.add_argument("--max-commits", type=int, default=50, help="newest commits per file (default 50)")
    warm.add_argument("--yes", action="store_true", help="do not ask before spending tokens")


def _trust_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", type=Path, default=None, help="a file or folder of the repository (default: current folder)"
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="say whether the definitions are trusted, change nothing")
    action.add_argument("--revoke", action="store_true", help="forget your trust in these definitions")
    parser.add_argument("--yes", action="store_true", help="trust without asking")
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")


def _attribution_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["push", "fetch"], help="push or fetch the authorship logs (refs/notes/ai)")
    parser.add_argument("remote", nargs="?", default="origin", help="the git remote (default origin)")


class Subcommand(NamedTuple):
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    runner: str  # "module:function", imported when the subcommand runs
    # The runner sets logging up when it first needs it (core/log_setup.py): a fast path that never logs does not
    # import `logging` (issue 29: `history FILE` against `--version` plus one `git log`)
    lazy_logging: bool = False


def _acp_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--setup", action="store_true", help="write your model settings interactively (auth method)")


SUBCOMMANDS: dict[str, Subcommand] = {
    "acp": Subcommand(
        "serve the Agent Client Protocol over stdio (Zed, JetBrains, CodeCompanion, agent-shell)",
        _acp_args,
        "nagent_lsp.acp.main:run",
    ),
    "agents": Subcommand(
        "list the agents (built-in, ~/.nagent/agents, .nagent/agents) with their sources",
        _list_args,
        "nagent_lsp.headless.agents:run_agents",
    ),
    "attribution": Subcommand(
        "authorship logs in refs/notes/ai (Git AI v3.0.0): push|fetch [REMOTE]",
        _attribution_args,
        "nagent_lsp.headless.attribution:attribution",
    ),
    "blame": Subcommand(
        "print each line of a file with who wrote it: a nagent turn, a tool's session (refs/notes/ai), or the commit",
        lambda parser: _file(parser, "print the lines and their attributions as JSON"),
        "nagent_lsp.headless.attribution:blame",
    ),
    "coedits": Subcommand(
        "print the files that historically change together with a file",
        _coedit_args,
        "nagent_lsp.headless.history:coedits",
    ),
    "context": Subcommand(
        "list the layers of a file's initial context (root context, AGENTS.md, CLAUDE.md, …) with source and size",
        _context_args,
        "nagent_lsp.headless.context:run",
    ),
    "conversations": Subcommand(
        "check: find secrets in the conversations under the state root (FILE:LINE: KIND, exit 1); --fix redacts",
        _conversations_args,
        "nagent_lsp.headless.conversations:run",
    ),
    "edit": Subcommand(
        "ask the model to change a file; prints the answer and the diff",
        _edit_args,
        "nagent_lsp.headless.edit:run_edit",
    ),
    "history": Subcommand(
        "print a file's git history: authors, changes, co-edited files",
        _history_args,
        "nagent_lsp.headless.history:history",
        lazy_logging=True,
    ),
    "patch": Subcommand(
        "merge a split's segments back into its file (atomic write; prints the JSON result)",
        _patch_args,
        "nagent_lsp.headless.splitpatch:run_patch",
    ),
    "recipe": Subcommand(
        "run a recipe on a file; prints the last output, and the diff when it changes the file",
        _recipe_args,
        "nagent_lsp.headless.agents:run_recipe",
    ),
    "recipes": Subcommand(
        "list the recipes (~/.nagent/recipes, .nagent/recipes) with their steps",
        _list_args,
        "nagent_lsp.headless.agents:run_recipes",
    ),
    "review": Subcommand(
        "list, show, apply or discard the proposals awaiting review in this workspace (JSON)",
        _review_args,
        "nagent_lsp.headless.review:run_review",
    ),
    "split": Subcommand(
        "split a large file into segments at natural boundaries (prints the JSON result)",
        _split_args,
        "nagent_lsp.headless.splitpatch:run_split",
    ),
    "summaries": Subcommand(
        "commit summaries shared through git notes: fetch|push [REMOTE], warm FILE… [--max-commits N] [--yes]",
        _summaries_args,
        "nagent_lsp.headless.summaries:run",
    ),
    "trust": Subcommand(
        "trust this repository's nagent definitions (config, agents, recipes) by their hash; --status, --revoke",
        _trust_args,
        "nagent_lsp.headless.trust:run",
    ),
    "status": Subcommand(
        "print version, state root, model and settings sources as JSON", _status_args, "nagent_lsp.headless.status:run"
    ),
    "summarize": Subcommand(
        "summarise a file with the configured model (cached by content)",
        _file,
        "nagent_lsp.headless.splitpatch:run_summarize",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="nagent-lsp", description="nagent language server and headless tools")
    parser.add_argument("--version", action="version", version=f"nagent-lsp {__version__}")
    parser.add_argument("--tcp", action="store_true", help="serve over TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument("--log-file", help="write logs to this file instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in SUBCOMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # run as a program (the console script): no key stays in the process's environment
        import sys

        from nagent_lsp.headless.launch import secure_start

        secure_start(sys.argv)
        if sys.argv[1:2] == ["history"]:  # its git work starts before the parser is even built (issue 29)
            from nagent_lsp.headless.history_early import start_early

            start_early(sys.argv[2:])
    args = build_parser().parse_args(argv)
    args.as_program = argv is None  # a program run may end without finalising the interpreter (headless/history.py)
    if args.command and SUBCOMMANDS[args.command].lazy_logging:
        from nagent_lsp.core.log_setup import set_up_later

        set_up_later(args.verbose, args.log_file)
    else:
        from nagent_lsp.core.logs import setup_logging

        setup_logging(args.verbose, args.log_file)
    if args.command:
        module, function = SUBCOMMANDS[args.command].runner.split(":")
        run: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
        return run(args)
    from nagent_lsp.core.long_lived import long_lived

    with long_lived():  # pygls, lsprotocol and every feature: made once, kept until exit, never collected
        from nagent_lsp.lsp.app import create_server

        server = create_server()
    if args.tcp:
        server.start_tcp(args.host, args.port)
    else:
        server.start_io()
    return 0
