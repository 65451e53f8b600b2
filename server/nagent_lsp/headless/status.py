"""`nagent-lsp status`: the settings the server would run with here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nagent_lsp.cli import print_json, subcommand
from nagent_lsp.workflows.session import Session
from nagent_lsp.workflows.status import status


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--folder", type=Path, default=Path.cwd(), help="workspace folder (default: current directory)")


@subcommand("status", "print version, state root, model and settings sources as JSON", _args)
def run(args: argparse.Namespace) -> int:
    session = Session(workspace_folders=[args.folder.resolve()])
    for problem in session.reload():
        print(f"warning: {problem}", file=sys.stderr)
    print_json(status(session))
    return 0
