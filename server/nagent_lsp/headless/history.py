"""`nagent-lsp history FILE` and `nagent-lsp coedits FILE`: the hover card's data as text (or the JSON result)."""

from __future__ import annotations

import argparse

from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs
from nagent_lsp.operations.history import coedits_result, history_result, render_coedits_text, render_history_text


def history(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        query = HistoryArgs(uri=path.as_uri(), maxCommits=args.max_commits)
        result = history_result(session_for(path), query, background=False)
        print_json(result) if args.json else print(render_history_text(result), end="")

    return run_guarded(run)


def coedits(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = coedits_result(session_for(path), CoeditsArgs(uri=path.as_uri(), limit=args.limit), background=False)
        print_json(result) if args.json else print(render_coedits_text(result), end="")

    return run_guarded(run)
