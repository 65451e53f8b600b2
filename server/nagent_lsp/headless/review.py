"""`nagent-lsp review list|show|apply ID [--accept h1,h2]|discard ID`, and the per-hunk questions of
`nagent-lsp edit FILE "request" --review`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nagent_lsp.core.errors import UserError
from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.headless.port import DiskPort
from nagent_lsp.operations.args import NoArgs, ReviewApplyArgs, ReviewDiscardArgs, ReviewIdArgs
from nagent_lsp.operations.session import Session
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.text.edits import split_lines, unified_diff

if TYPE_CHECKING:
    from nagent_lsp.operations.review import FileView, HunkView, ProposalView, ReviewApplied


def run_review(args: argparse.Namespace) -> int:
    from nagent_lsp.operations import review

    async def run() -> None:
        session = session_for(Path.cwd())
        port = DiskPort(session.workspace_folders, interactive=False, quiet=True)
        if args.action == "list":
            print_json(review.review_list(session, port, NoArgs()))
            return
        if not args.id:
            from nagent_lsp.core.errors import InvalidArgument

            raise InvalidArgument("id", f"`review {args.action}` needs a proposal id (see `nagent-lsp review list`)")
        if args.action == "show":
            print_json(await review.review_show(session, port, ReviewIdArgs(args.id)))
        elif args.action == "apply":
            accept = [h.strip() for h in args.accept.split(",") if h.strip()] if args.accept else None
            print_json(await review.review_apply(session, port, ReviewApplyArgs(args.id, accept)))
        else:
            print_json(await review.review_discard(session, port, ReviewDiscardArgs(args.id)))

    return run_guarded(run)


CONTEXT = 3  # lines shown around a hunk, as `git diff` does


def file_lines(file: FileView, limit: int | None = None) -> list[str]:
    """The file's current lines, read once for all its hunks through the bounded reader (none for a new file or
    one that cannot be read, or is larger than `limit`: maxFileBytes)."""
    if file.created:
        return []
    try:
        return split_lines(read_disk_text(Path(file.path), limit=limit))
    except (OSError, UserError):
        return []


def hunk_diff(file: FileView, hunk: HunkView, lines: list[str], cwd: Path | None = None) -> str:
    """A hunk as `git diff` would show it: the path relative to the working folder, the line numbers where the hunk
    sits in the file now (`lines`, from `file_lines`), and up to three lines of the file around it."""
    path = Path(file.path)
    shown = shown_path(path, cwd)
    created = file.created
    around, first = ("", ""), 0
    if not created:
        start, end = hunk.range.start.line, hunk.range.end.line
        first = max(0, start - CONTEXT)
        around = ("".join(lines[first:start]), "".join(lines[end : end + CONTEXT]))
    before, after = around
    old, new = before + hunk.oldText + after, before + hunk.newText + after
    diff = unified_diff(old, new, shown, context=CONTEXT, created=created, first_line=first)
    return diff or "(no textual change)\n"


def shown_path(path: Path, cwd: Path | None = None) -> str:
    base = cwd or Path.cwd()
    return os.path.relpath(path, base) if path.is_relative_to(base) else str(path)


async def ask_per_hunk(session: Session, port: DiskPort, proposal: ProposalView) -> ReviewApplied | None:
    """y: accept, n: reject, a: accept this and every remaining hunk, q: reject this and every remaining one.
    Without a terminal nothing is asked: the proposal stays pending (None) and is printed for `review apply`."""
    from nagent_lsp.operations import review

    for file in proposal.files:
        lines = file_lines(file, session.settings.maxFileBytes)
        for hunk in file.hunks:
            print(f"[{hunk.id}] {shown_path(Path(file.path))}{' (new file)' if file.created else ''}")
            print(hunk_diff(file, hunk, lines), end="")
            for warning in hunk.warnings or []:  # issue 26: the hunk rewrites a recent fix's lines
                print(f"warning: {warning}")
    if not port.interactive:
        print(
            f"proposal {proposal.id} awaits review: nagent-lsp review apply {proposal.id} [--accept h1,h2] "
            f"or nagent-lsp review discard {proposal.id}",
            file=sys.stderr,
        )
        return None
    accept: list[str] = []
    every = [h.id for f in proposal.files for h in f.hunks]
    for i, hunk_id in enumerate(every):
        answer = ""
        while answer not in ("y", "n", "a", "q"):
            try:
                answer = input(f"apply {hunk_id}? [y,n,a,q] ").strip().lower()[:1]
            except EOFError:
                answer = "q"
        if answer == "y":
            accept.append(hunk_id)
        elif answer == "a":
            accept += every[i:]
            break
        elif answer == "q":
            break
    return await review.review_apply(session, port, ReviewApplyArgs(proposal.id, accept))
