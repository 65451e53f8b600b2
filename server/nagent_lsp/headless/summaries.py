"""`nagent-lsp summaries fetch|push [REMOTE]` and `nagent-lsp summaries warm FILE… [--max-commits N] [--yes]`
(DESIGN §11): commit summaries shared by the team through git notes, and paid for once ahead of time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.model import estimate_tokens
from nagent_lsp.headless.common import run_guarded, session_for
from nagent_lsp.history.commit_summaries import EXCERPT_CHARS, SUMMARY_BATCH, SUMMARY_INSTRUCTIONS
from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.history.summary_notes import NOTES_REF, SummaryNotes
from nagent_lsp.llm.models import profile_price, summary_settings
from nagent_lsp.operations.history import service_for
from nagent_lsp.operations.session import Session

OUTPUT_PER_COMMIT = 40  # tokens of one summary line and its JSON
BAR = 30


def _repository(folder: Path) -> GitRepository:
    top = git_toplevel(str(folder))
    if top is None:
        raise UserError(f"{folder} is not inside a git repository")
    return GitRepository(top)


def fetch(args: argparse.Namespace) -> int:
    def run() -> None:
        notes = SummaryNotes(_repository(Path.cwd()))
        try:
            report = notes.fetch(args.remote)
        except GitError as exc:
            raise UserError(f"fetching {NOTES_REF} from {args.remote} failed: {exc}") from None
        if not report.moved:
            print(f"{NOTES_REF}: nothing new from {args.remote}")
        else:
            print(f"{NOTES_REF}: merged from {args.remote}: {report.entries} new summaries on {report.commits} commits")

    return run_guarded(run)


def push(args: argparse.Namespace) -> int:
    def run() -> None:
        notes = SummaryNotes(_repository(Path.cwd()))
        try:
            pushed, merged = notes.push(args.remote)
        except GitError as exc:
            raise UserError(f"pushing {NOTES_REF} to {args.remote} failed: {exc}") from None
        if not pushed:
            print(f"{NOTES_REF}: no shared summaries here yet; nothing to push")
            return
        if merged is not None and merged.moved:
            print(f"{NOTES_REF}: merged {merged.entries} summaries from {args.remote} first")
        print(f"{NOTES_REF}: pushed to {args.remote}")

    return run_guarded(run)


def estimate(commits: int) -> int:
    """About how many tokens summarising `commits` commits spends: per batch the instructions, per commit its
    subject and a diff excerpt (at most EXCERPT_CHARS) in, one line out."""
    batches = -(-commits // SUMMARY_BATCH)
    per_commit = estimate_tokens("x" * (EXCERPT_CHARS + 200)) + OUTPUT_PER_COMMIT
    return batches * estimate_tokens(SUMMARY_INSTRUCTIONS) + commits * per_commit


def _bar(done: int, total: int, out: TextIO) -> None:
    filled = BAR * done // total if total else BAR
    out.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} commits")
    out.flush()


def _consent_given(session: Session, files: list[Path], roots: list[Path]) -> None:
    """The confirmation (or --yes) is the consent to send these repositories' diffs, for this run only (issue 25);
    the services then remake their summarizers with it."""
    from nagent_lsp.operations.summary_consent import grant_for_this_run

    grant_for_this_run(session, roots)
    for path in files:
        service_for(session, path, background=False)


def warm(args: argparse.Namespace) -> int:
    def run() -> None:
        files = [Path(f).resolve() for f in args.files]
        session = session_for(files[0])
        settings = session.settings
        if args.max_commits < 1:
            raise UserError("--max-commits must be at least 1")
        hs = HistorySettings(max(args.max_commits, settings.history.maxCommits), settings.history.maxChangesetFiles)
        work = []
        from_notes = 0
        for path in files:
            found = service_for(session, path, background=False)
            if found is None:
                raise UserError(f"{path} is not a file of a git repository in the workspace")
            service, rel = found
            entry = service.entry(rel, hs, sync=True, page=args.max_commits)  # all it will summarise, not a first page
            if entry is None:
                continue
            todo, subjects, names = service.missing_summaries(entry, args.max_commits)
            missing = service.take_from_notes(todo)
            from_notes += len(todo) - len(missing)
            if missing:
                work.append((service, missing, subjects, names))
        total = sum(len(w[1]) for w in work)
        shared = f" ({from_notes} taken from the shared notes)" if from_notes else ""
        if not total:
            print(f"every commit of {len(files)} file(s) already has a summary{shared}")
            return
        model = summary_settings(settings)
        price = profile_price(settings, settings.summaryModel)
        tokens = estimate(total)
        cost = f", about {tokens * price[0] / 1e6:.4f} in the profile's currency (input price)" if price else ""
        print(
            f"{total} commit(s) of {len(files)} file(s) have no summary{shared}; summarising them with {model.model} "
            f"spends about {tokens:,} tokens{cost}."
        )
        if not args.yes:
            if not sys.stdin.isatty():
                raise UserError("not confirmed: run again with --yes to summarise without asking")
            answer = input("Summarise them? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing summarised")
                return
        if not settings.model_configured(session.environ) and not model.model_configured(session.environ):
            raise UserError("no model configured for summaries (summaryModel / model, baseUrl or the API key)")
        _consent_given(session, files, [service.root for service, *_ in work])  # the answer above
        done = 0
        _bar(done, total, sys.stderr)
        for service, missing, subjects, names in work:
            for start in range(0, len(missing), SUMMARY_BATCH):
                batch = missing[start : start + SUMMARY_BATCH]
                service.summarize_now(batch, subjects, names)
                done += len(batch)
                _bar(done, total, sys.stderr)
        sys.stderr.write("\n")
        have = sum(1 for service, missing, _, _ in work for p in missing if service.summaries.get(*p))
        where = " and written to git notes" if settings.history.shareSummaries == "notes" else ""
        print(f"summarised {have} of {total} commit(s){where}")

    return run_guarded(run)


def run(args: argparse.Namespace) -> int:
    return {"fetch": fetch, "push": push, "warm": warm}[args.action](args)
