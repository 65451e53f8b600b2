"""`nagent-lsp status`: the settings the server would run with here."""

from __future__ import annotations

import argparse
import sys

from nagent_lsp.headless.common import print_json
from nagent_lsp.operations.session import Session
from nagent_lsp.operations.status import status


def run(args: argparse.Namespace) -> int:
    session = Session(workspace_folders=[args.folder.resolve()])
    for problem in session.reload():
        print(f"warning: {problem}", file=sys.stderr)
    print_json(status(session))
    return 0
