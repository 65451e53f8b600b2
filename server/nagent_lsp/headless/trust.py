"""`nagent-lsp trust [PATH]`, `--status`, `--revoke` (DESIGN §12): the user's trust in a repository's definitions.

Trusting shows the files the hash covers and the hash, then asks on a terminal ("Trust these definitions? [y/N]");
`--yes` skips the question; without a terminal and without `--yes` nothing is trusted (a script must say so).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import attrs

from nagent_lsp.core.errors import UserError
from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.operations.args import TrustArgs, TrustStatusArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.trust import TrustState

QUESTION = "Trust these definitions? [y/N] "


def run(args: argparse.Namespace) -> int:
    failed: list[bool] = []  # declined, or the definitions cannot be trusted: exit 1

    def act() -> None:
        from nagent_lsp.operations import trust

        path = (args.path or Path.cwd()).resolve()
        session = session_for(path)
        uri = path.as_uri()
        if args.status:
            result = trust.trust_status(session, TrustStatusArgs(uri=uri))
        elif args.revoke:
            result = trust.revoke_trust(session, TrustStatusArgs(uri=uri))
        else:
            shown = trust.trust_status(session, TrustStatusArgs(uri=uri))
            if shown.hash is None or (shown.trusted and not shown.changedSinceTrusted):
                result = shown  # nothing to trust, or trusted already: nothing to ask
            else:
                _show(shown, sys.stderr if args.json else sys.stdout)
                if not args.yes and not _confirmed():
                    result = attrs.evolve(shown, message=f"not trusted: nothing recorded for {shown.stateRoot}")
                else:
                    result = trust.trust_definitions(session, TrustArgs(uri=uri, hash=shown.hash))
                failed.append(not result.trusted)
        if args.json:
            print_json(result)
        else:
            print(result.message)

    code = run_guarded(act)
    return 1 if code == 0 and any(failed) else code


def _show(state: TrustState, out: TextIO) -> None:
    print(f"nagent definitions in {state.stateRoot}:", file=out)
    for path in state.files:
        print(f"  {path}", file=out)
    print(f"sha256 {state.hash}", file=out)
    if state.changedSinceTrusted:
        print("(they changed since you trusted them)", file=out)
    out.flush()


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        raise UserError("not trusted: no terminal to ask on; pass --yes to trust these definitions")
    sys.stderr.write(QUESTION)  # stderr: with --json, stdout holds the result alone
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
