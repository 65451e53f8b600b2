"""`nagent-lsp history FILE` and `nagent-lsp coedits FILE`: the hover card's data as text (or the JSON result).

A one-shot process never builds the repository index (issue 29): with a persisted index (a server ran here) it loads
it, else it answers from the file's own `git log` page, following renames, as the server does before its index is
ready; such an answer says it is partial when the page was cut (the text repeats the card's "Partial: …" line)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nagent_lsp.core.isolation import probe_soon

if TYPE_CHECKING:
    from nagent_lsp.operations.history import FileHistory

# git runs in a PID namespace probed once per process (core/isolation.py, a few short-lived processes): the probe
# starts before the operations stack is imported, so it runs on the other core meanwhile (issue 29)
probe_soon()

from nagent_lsp.headless.common import print_json, run_guarded, session_for  # noqa: E402
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs  # noqa: E402
from nagent_lsp.operations.history import (  # noqa: E402
    coedits_result,
    history_result,
    render_coedits_text,
    render_history_text,
)


def history(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        query = HistoryArgs(uri=path.as_uri(), maxCommits=args.max_commits)
        result = history_result(session_for(path), query, background=False)
        print_json(result) if args.json else print(history_text(result), end="")

    return run_guarded(run)


def history_text(result: FileHistory) -> str:
    """The CLI's text; a partial answer says so under its first line, in the words of the LSP's card."""
    text = render_history_text(result)
    said = next((line.strip("*") for line in result.markdown.splitlines() if line.startswith("*Partial")), None)
    if not result.partial or said is None:
        return text
    head, _, rest = text.partition("\n")
    return f"{head}\n{said}\n{rest}"


def coedits(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        result = coedits_result(session_for(path), CoeditsArgs(uri=path.as_uri(), limit=args.limit), background=False)
        print_json(result) if args.json else print(render_coedits_text(result), end="")

    return run_guarded(run)
