"""`nagent-lsp history FILE` and `nagent-lsp coedits FILE`: the hover card's data as text (or the JSON result)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.operations.history import coedits_result, history_result, render_coedits_text, render_history_text



def history(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = history_result(session_for(path), path, args.max_commits, background=False)
        print_json(result) if args.json else print(render_history_text(result), end="")

    return run_guarded(run)


def coedits(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = coedits_result(session_for(path), path, args.limit, background=False)
        print_json(result) if args.json else print(render_coedits_text(result), end="")

    return run_guarded(run)
