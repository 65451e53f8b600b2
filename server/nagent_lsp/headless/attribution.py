"""`nagent-lsp blame FILE` (each line with who wrote it: a nagent turn, another tool's session from
`refs/notes/ai`, or the commit) and `nagent-lsp attribution push|fetch [REMOTE]` (the authorship logs, shared the
way summary notes are)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.errors import UserError
from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.history.ai_notes import AI_REF, AiNotes
from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.operations.attribution import BlameLine, blame_file


def render_blame(lines: list[BlameLine]) -> str:
    width = len(str(len(lines)))
    out = []
    for item in lines:
        found = item.attribution
        if found is None:
            who = "(not committed)"
        elif found.source == "nagent":
            who = f"nagent turn {found.turn or '?'} {Path(found.conversationPath or '?').name}"
        elif found.source == "notes":
            who = f"{found.tool} {found.model or ''} {found.sessionId or ''}".strip()
        else:
            who = found.message
        out.append(f"{item.line:>{width}} {who[:60]:<60} | {item.text}")
    return "\n".join(out) + ("\n" if out else "")


def blame(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        lines = blame_file(session_for(path), path.as_uri())
        if args.json:
            print_json(lines)
        else:
            print(render_blame(lines), end="")

    return run_guarded(run)


def attribution(args: argparse.Namespace) -> int:
    def run() -> None:
        top = git_toplevel(str(Path.cwd()))
        if top is None:
            raise UserError(f"{Path.cwd()} is not inside a git repository")
        notes = AiNotes(GitRepository(top))
        try:
            if args.action == "push":
                pushed = notes.push(args.remote)
                print(f"{AI_REF}: pushed to {args.remote}" if pushed else f"{AI_REF}: no authorship logs to push")
            else:
                taken = notes.fetch(args.remote)
                print(f"{AI_REF}: {taken} authorship logs taken from {args.remote}")
        except GitError as exc:
            raise UserError(f"{args.action} of {AI_REF} with {args.remote} failed: {exc}") from None

    return run_guarded(run)
