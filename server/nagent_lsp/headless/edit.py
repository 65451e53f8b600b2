"""`nagent-lsp edit FILE "request"`: the edit run without an editor; the change is written atomically and shown
as a diff."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.headless.port import DiskPort
from nagent_lsp.operations.args import EditArgs
from nagent_lsp.operations.edit import edit


def run_edit(args: argparse.Namespace) -> int:
    async def run() -> None:
        path = args.file.resolve()
        session = session_for(path)
        port = DiskPort(session.workspace_folders, quiet=args.json, stream=False if args.json else None)
        result = await edit(
            session,
            port,
            EditArgs(
                uri=path.as_uri(),
                request=args.request,
                preview=bool(args.review),
                agent=args.agent,
                profile=getattr(args, "profile", None),
            ),
        )
        if args.json:
            print_json(result)
            return
        if result.response and not port.streamed:  # a terminal saw the answer as it was written
            print(result.response)
        for hint in result.coupling or []:  # issue 26: what history says the change set may lack
            print(f"hint: {hint.message}", file=sys.stderr)
        for warning in result.historyWarnings or []:
            print(f"warning: {Path(warning.uri).name}:{warning.line + 1}: {warning.message}", file=sys.stderr)
        if result.proposal is not None:
            from nagent_lsp.headless.review import ask_per_hunk

            for why in result.reviewRequired or []:  # files a tool runs later: reviewed whatever --review says
                print(f"review required: {why}", file=sys.stderr)
            resolved = await ask_per_hunk(session, port, result.proposal)
            if resolved is not None:
                rejected = ", ".join(resolved.rejected) or "none"
                print(f"applied: {resolved.applied}, rejected: {rejected}", file=sys.stderr)
                if resolved.patchPath:
                    print(Path(resolved.patchPath).read_text(encoding="utf-8"), end="")
            print(f"conversation: {result.conversation.path}", file=sys.stderr)
            return
        if result.patchPath:
            print(Path(result.patchPath).read_text(encoding="utf-8"), end="")
        elif result.reason:
            print(f"(not applied: {result.reason})", file=sys.stderr)
        print(f"conversation: {result.conversation.path}", file=sys.stderr)

    return run_guarded(run)
