"""`nagent.history`, `nagent.coedits`, the history hover and the {file-history} block, from the session's
history services (nagent_lsp.history.service).

Public entry points (others call these):
    service_for(session, path) -> (HistoryService, rel) | None
    history_result(session, HistoryArgs) -> FileHistory               # nagent.history
    coedits_result(session, CoeditsArgs) -> Coedits                   # nagent.coedits
    hover_markdown(session, path, line) -> str | None                 # textDocument/hover, line is 1-based
    warm(session, path)                                               # textDocument/didOpen: index + first page
    file_history_block(session, path, wait_summaries=0.0) -> str      # {file-history} for the edit loop
    render_history_text(result) / render_coedits_text(result) -> str  # the CLI's output
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import Refused
from nagent_lsp.config.parse_args import file_argument
from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.config.state_root import git_toplevel, repo_relative
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.history import render
from nagent_lsp.history.coedits import TOP, CoeditRow, CoeditTable
from nagent_lsp.history.commit_summaries import make_model_summarizer
from nagent_lsp.history.encoding import display, to_bytes
from nagent_lsp.history.git import GitError
from nagent_lsp.history.index import CommitRef
from nagent_lsp.history.render import HistoryView
from nagent_lsp.history.service import BLAME_WAIT, HOVER_WAIT, HistoryService, Summarizer
from nagent_lsp.operations.args import CoeditsArgs, HistoryArgs
from nagent_lsp.operations.buffers import read_rules, refusal
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")

# -- the results --------------------------------------------------------------------------------------------------


@attrs.frozen
class CommitEntry:
    """One commit of a file, newest first. `path` is the file's name in that commit (older commits may predate a
    rename); `summary` when the model (or the team's git notes) summarised it."""

    hash: str
    short: str
    date: str
    author: str
    email: str
    subject: str
    path: str
    summary: str | None = None


@attrs.frozen
class AuthorEntry:
    name: str
    email: str
    commits: int


@attrs.frozen
class CoeditEntry:
    """A file changed in the same commits: `count` of them, `rate` of the file's commits, `level` in words."""

    path: str
    count: int
    rate: float
    level: str

    @classmethod
    def of(cls, row: CoeditRow) -> CoeditEntry:
        return cls(row.path, row.count, round(row.rate, 4), row.level)


@attrs.frozen
class FileHistory:
    """The `nagent.history` result; `partial` (true, else absent) when answered before the repository's index was
    ready, so older commits may be missing."""

    file: str
    repository: str
    commits: list[CommitEntry]
    authors: list[AuthorEntry]
    coedits: list[CoeditEntry]
    markdown: str
    partial: bool | None = None


@attrs.frozen
class Coedits:
    """The `nagent.coedits` result: the files most often changed with `file`, over `commits` commits."""

    file: str
    commits: int
    rows: list[CoeditEntry]


# -- session-level entry points -------------------------------------------------------------------------------------


def _summarizer_for(session: Session, stopping: threading.Event | None = None) -> Summarizer | None:
    if not session.settings.history.summarize:
        return None
    from nagent_lsp.llm.models import optional_summary_model  # the model SDK's layer: not at a CLI's start

    model = optional_summary_model(session.settings, session.environ, "commitSummary")
    if model is None:
        return None
    return make_model_summarizer(lambda messages: model.complete_sync(messages, cancel=stopping))


def service_for(
    session: Session, path: Path, *, background: bool = True, summarize: bool = True
) -> tuple[HistoryService, str] | None:
    """The repository's service and the file's path in it; None outside git. `background=False` (CLI): load the
    persisted index if there is one, never start a full build. `summarize=False`: a caller that asks no model
    (the CLI's history and coedits) does not make the summarizer (issue 29: the model layer's imports)."""
    path = Path(os.path.abspath(path))
    if not read_rules(session, path).allows(path):
        return None  # outside the workspace or denyRead: no history, and no .nagent/ in someone else's repository
    top = git_toplevel(str(path if path.is_dir() else path.parent))
    if top is None:
        return None
    root = Path(os.path.realpath(top))
    rel = repo_relative(root, path)
    if rel is None:
        return None
    service = session.history_service(root, session.state_dir(path, "cache"))
    if summarize:
        from nagent_lsp.operations.summary_consent import consent_of, gated  # issue 25: diffs leave only with consent

        service.use_summarizer(
            (session.settings, session.environ, consent_of(session).token(root)),
            lambda: gated(session, root, _summarizer_for(session, service.stopping)),
        )
    service.share_summaries(session.settings.history.shareSummaries == "notes")
    service.prepare(background)
    if background:  # a one-shot CLI query follows no HEAD moves and writes no notes (issue 29: ~50 ms of imports)
        from nagent_lsp.operations.attribution import watch  # issue 27: authorship logs for new commits

        watch(session, service)
    return service, rel


def _require(session: Session, path: Path, background: bool = True) -> tuple[HistoryService, str]:
    try:
        read_rules(session, path).confine(path)
    except Refused as exc:
        raise refusal(exc, "uri") from None
    found = service_for(session, path, background=background, summarize=background)
    if found is None:
        raise UserError(f"{path} is not inside a git repository, so it has no history.")
    return found


def _commit_entry(view: HistoryView, c: CommitRef) -> CommitEntry:
    summary = view.summary(c)
    return CommitEntry(c.hash, c.hash[:7], render.iso(c.time), c.author, c.email, c.subject, c.path, summary or None)


def history_result(session: Session, args: HistoryArgs, *, background: bool = True) -> FileHistory:
    """The `nagent.history` result."""
    if args.maxCommits is not None and args.maxCommits < 1:
        raise InvalidArgument("maxCommits", "must be at least 1")
    service, rel = _require(session, file_argument(args.uri), background)
    hs = session.settings.history
    if args.maxCommits is not None:
        hs = HistorySettings(args.maxCommits, hs.maxChangesetFiles, hs.summarize)
    entry = service.entry(rel, hs, sync=True)
    if entry is None:
        entry_view = HistoryView(display(to_bytes(rel)), str(service.root), (), 0, True, CoeditTable(0, ()))
        return FileHistory(entry_view.file, str(service.root), [], [], [], render.history_markdown(entry_view))
    _readable(entry.view)
    if background:  # a one-shot CLI process would exit before a background summary could land
        service.request_summaries(entry, hs)
    else:  # but what the team shares in git notes costs nothing to show
        service.summaries_from_notes(entry, hs)
    view = entry.view
    # answered before the repository's index was ready: the newest commits only (a first page, or what the
    # background build has read so far); a later call answers from the complete index
    partial = not view.complete and len(view.commits) < hs.maxCommits
    return FileHistory(
        file=view.file,
        repository=str(service.root),
        commits=[_commit_entry(view, c) for c in view.commits],
        authors=[AuthorEntry(a.name, a.email, a.commits) for a in view.authors],
        coedits=[CoeditEntry.of(r) for r in view.coedits.rows],
        markdown=render.history_markdown(view),
        partial=True if partial else None,
    )


def _readable(view: HistoryView) -> None:
    """A command is told when git could not read the history at all (the hover card shows it instead)."""
    if view.problem and not view.commits:
        raise UserError(f"cannot read the history of {view.file}: {view.problem}")


def coedits_result(session: Session, args: CoeditsArgs, *, background: bool = True) -> Coedits:
    """The `nagent.coedits` result."""
    if args.limit is not None and args.limit < 1:
        raise InvalidArgument("limit", "must be at least 1")
    service, rel = _require(session, file_argument(args.uri), background)
    hs = session.settings.history
    entry = service.entry(rel, hs, sync=True)
    if entry is None:
        return Coedits(display(to_bytes(rel)), 0, [])
    _readable(entry.view)
    table = entry.view.coedits
    rows = table.rows[: args.limit if args.limit is not None else TOP]
    return Coedits(entry.view.file, table.commits, [CoeditEntry.of(r) for r in rows])


def hover_markdown(
    session: Session,
    path: Path,
    line: int | None = None,
    *,
    wait: float = HOVER_WAIT,
    blame_wait: float = BLAME_WAIT,
    started: float | None = None,
    text: str | None = None,
) -> str | None:
    """The history card with, on a line nagent (or another tool's authorship log) attributes, who wrote it
    (operations/attribution.py). `text` is the buffer: its line is mapped to HEAD's before blame (issue 25)."""
    last: list[str] = []  # the commit blame gives the line, when the card knows it
    if started is not None:  # the budget counts from the request's arrival (imports and start-up included)
        wait = max(0.0, wait - (time.monotonic() - started))
    card = _history_card(session, path, line, wait=wait, blame_wait=blame_wait, text=text, last=last)
    if line is None:
        return card
    from nagent_lsp.operations.attribution import hover_line

    written = hover_line(session, path, line - 1, text, last[0] if last else None)
    if not written:
        return card
    return f"{card}\n\n{written}" if card else written


def _history_card(
    session: Session,
    path: Path,
    line: int | None,
    *,
    wait: float,
    blame_wait: float,
    text: str | None,
    last: list[str],
) -> str | None:
    """The hover card for `path` at 1-based `line`; None outside git or for a file with no commits. Once warm it
    reads memory only; it never waits for the model, and for git at most `wait` seconds (after HEAD moved, or
    before the index is ready: then the card says what is known so far and that it is partial)."""
    found = service_for(session, path)
    if found is None:
        return None
    service, rel = found
    hs = session.settings.history
    entry = service.entry(rel, hs, sync=False, wait=wait)
    if entry is None:
        return None
    if not entry.view.commits and not entry.view.problem and (entry.view.complete or not entry.view.building):
        return None  # known to have no commits (untracked, or new)
    if not entry.view.commits:
        return render.hover_card(entry.view, [])  # nothing known yet (being built), or git could not read it
    service.request_summaries(entry, hs)
    commit, state = (None, "")
    if line is not None:
        at_head: int | None = line
        if text is not None:  # uncommitted edits above the line must not shift its blame onto another commit
            from nagent_lsp.operations.attribution import head_line_of

            try:
                at_head = head_line_of(service.git, service.root, rel, text, line - 1)
            except (GitError, OSError) as exc:  # the blame of the line as numbered, as before
                log.debug("cannot map line %d of %s to HEAD: %s", line, rel, exc)
        if at_head is None:
            commit, state = None, "not committed yet"
        else:
            commit, state = service.line_commit(rel, at_head, entry, blame_wait)
            if commit is not None:
                last.append(commit.hash)
    return render.hover_card(entry.view, entry.all_authors, line, commit, state)


def warm(session: Session, path: Path) -> None:
    """A file was opened: start the repository's index (load or build) and the file's first page now, so the
    first hover finds them ready. Never waits; nothing for a file outside git."""
    found = service_for(session, path)
    if found is None:
        return
    service, rel = found
    service.entry(rel, session.settings.history, sync=False, wait=0.0)


def file_history_block(session: Session, path: Path, wait_summaries: float = 0.0) -> str:
    """The `{file-history}` block for the edit loop; "" outside git or without commits. Missing summaries are
    requested in the background; `wait_summaries` > 0 lets the caller give them that long to arrive."""
    found = service_for(session, path)
    if found is None:
        return ""
    service, rel = found
    hs = session.settings.history
    entry = service.entry(rel, hs, sync=True)
    if entry is None:
        return ""
    if service.request_summaries(entry, hs) is not None and wait_summaries > 0:
        service.wait_summaries(wait_summaries)
    return render.file_history_block(entry.view)


# -- plain text for the CLI ------------------------------------------------------------------------------------------


def render_history_text(result: FileHistory) -> str:
    return render.history_text(
        result.file,
        result.repository,
        [(c.date, c.short, c.author, c.summary or c.subject) for c in result.commits],
        [(a.commits, a.name, a.email) for a in result.authors],
        _coedit_lines(result.coedits),
    )


def render_coedits_text(result: Coedits) -> str:
    return render.coedits_text(_coedit_lines(result.rows), result.commits)


def _coedit_lines(rows: list[CoeditEntry]) -> list[render.CoeditLine]:
    return [(r.path, r.count, r.rate, r.level) for r in rows]
