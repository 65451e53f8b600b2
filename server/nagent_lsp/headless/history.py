"""`nagent-lsp history FILE` and `nagent-lsp coedits FILE`: the hover card's data as text (or the JSON result).

A one-shot process never builds the repository index (issue 29): with a persisted index (a server ran here) it loads
it, else it answers from the file's own `git log` page, following renames, as the server does before its index is
ready; such an answer says it is partial when the page was cut (the text repeats the card's "Partial: …" line).
The first `history` in a repository takes headless/history_cold.py's path when that gives the same answer; this
module imports nothing else at the top, and sets up logging only when it leaves that path."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nagent_lsp.core.log_setup import set_up_now
from nagent_lsp.headless.history_early import back_to_defaults, read_git_config_soon

if TYPE_CHECKING:
    from nagent_lsp.operations.history import FileHistory


def history(args: argparse.Namespace) -> int:
    path = _resolved(args.file)
    if path is None:
        return 2
    read_git_config_soon(path)
    if not args.json:
        from nagent_lsp.headless.history_cold import cold_history_text

        text = cold_history_text(path, args.max_commits)
        if text is not None:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except BrokenPipeError:  # `nagent-lsp history F | head`: the reader left, nothing to report
                pass
            if args.as_program:
                _leave_at_once()
            return 0
    back_to_defaults()  # what headless/history_early.py set for the cold answer
    set_up_now()
    from nagent_lsp.headless.common import print_json, run_guarded, session_for
    from nagent_lsp.operations.args import HistoryArgs
    from nagent_lsp.operations.history import history_result

    def run() -> None:
        query = HistoryArgs(uri=path.as_uri(), maxCommits=args.max_commits)
        result = history_result(session_for(path), query, background=False)
        print_json(result) if args.json else print(history_text(result), end="")

    return run_guarded(run)


def _leave_at_once() -> None:
    """End the process without tearing the interpreter down (issue 29: ~20 ms of module and object finalisation
    after the cold answer). Safe there: the answer is written and flushed, nothing was opened for writing, and every
    git process it started has ended; the threads left are daemons that only read."""
    try:
        sys.stderr.flush()
    finally:
        os._exit(0)


def _resolved(file: Path) -> Path | None:
    """FILE with its symlinks resolved, or None after saying why it cannot be (a loop, a name too long)."""
    try:
        return file.resolve()
    except (OSError, RuntimeError) as exc:
        from nagent_lsp.agent.confine import os_reason

        print(f"nagent-lsp: {file} cannot be resolved ({os_reason(exc)})", file=sys.stderr)
        return None


def history_text(result: FileHistory) -> str:
    """The CLI's text; a partial answer says so under its first line, in the words of the LSP's card."""
    from nagent_lsp.history import render
    from nagent_lsp.operations.history import render_history_text

    return render.partial_noted(render_history_text(result), result.markdown, bool(result.partial))


def coedits(args: argparse.Namespace) -> int:
    set_up_now()
    path = _resolved(args.file)
    if path is None:
        return 2
    from nagent_lsp.headless.common import print_json, run_guarded, session_for
    from nagent_lsp.operations.args import CoeditsArgs
    from nagent_lsp.operations.history import coedits_result, render_coedits_text

    def run() -> None:
        result = coedits_result(session_for(path), CoeditsArgs(uri=path.as_uri(), limit=args.limit), background=False)
        print_json(result) if args.json else print(render_coedits_text(result), end="")

    return run_guarded(run)
