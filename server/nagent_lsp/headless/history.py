"""`nagent-lsp history FILE` and `nagent-lsp coedits FILE`: the hover card's data as text (or the JSON result)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nagent_lsp.cli import print_json, subcommand
from nagent_lsp.headless.common import run_guarded, session_for
from nagent_lsp.workflows.history import coedits_result, history_result, render_coedits_text, render_history_text


def _history_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("--max-commits", type=int, default=None, help="look at this many recent commits")
    parser.add_argument("--json", action="store_true", help="print the nagent.history result as JSON")


def _coedit_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("--limit", type=int, default=None, help="rows to show (default 20)")
    parser.add_argument("--json", action="store_true", help="print the nagent.coedits result as JSON")


@subcommand("history", "print a file's git history: authors, changes, co-edited files", _history_args)
def history(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = history_result(session_for(path), path, args.max_commits, background=False)
        print_json(result) if args.json else print(render_history_text(result), end="")

    return run_guarded(run)


@subcommand("coedits", "print the files that historically change together with a file", _coedit_args)
def coedits(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = coedits_result(session_for(path), path, args.limit, background=False)
        print_json(result) if args.json else print(render_coedits_text(result), end="")

    return run_guarded(run)
