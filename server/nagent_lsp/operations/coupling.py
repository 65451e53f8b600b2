"""History checks of a change set (issue 26, contracts.md B): completeness hints and recent-fix warnings.

- `coupling_hints(session, files)`: for the files a change set touches, the partners history says usually change
  with them and that the change set did not touch (history.coupling.predict over the history service's index; none
  until the index is ready for HEAD). Each carries the sentence a client shows (`message`).
- `fix_warnings(session, path, base_text, start, end)`: when lines [start, end) (0-based, of `base_text`) were last
  changed (blame, history.line_blame's cache: no wait beyond a small file's blame) by a commit younger than
  `history.recentFixDays` whose subject — or cached summary — says it fixed or reverted something, one sentence per
  such commit: "changes lines from abc1234 'Fix race in refs update' (Alice, 3 days ago)". No model call.
- `history_checks(session, changes)`: both for a run's change set, as `RunResult` carries them.

Hints never change anything: they are shown (results, Hint diagnostics, the CLI) and offered as code actions."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import attrs
from attrs import AttrsInstance

from nagent_lsp.core.ports import EditorPort, FileChange
from nagent_lsp.history.coupling import Hint, changed_since_head, predict, service_evidence
from nagent_lsp.history.service import HistoryService
from nagent_lsp.operations.history import service_for
from nagent_lsp.operations.session import Session

if TYPE_CHECKING:
    from nagent_lsp.store.proposals import ProposalRecord

V = TypeVar("V", bound=AttrsInstance)  # operations.review's ProposalView (which imports this module)

log = logging.getLogger("nagent_lsp")

FIX = re.compile(
    r"\b(fix(?:e[sd])?|fixup|revert(?:s|ed)?|regression|hotfix|bug|race|crash|leak|broke|breakage)\b", re.I
)
READY_WAIT = 3.0  # a run's result waits at most this long for the history index (then: no hints)
BLAME_WAIT = 2.0  # a run's result waits at most this long per file for a small file's blame (once per file)
BUFFER_WAIT = 5.0  # seconds for the event loop to hand over an open buffer's text
HINTS = 3  # hints per change set at most: false ones are what makes people ignore them
MAX_LINES = 400  # lines blamed per hunk (a hunk over a whole file is checked on its first lines)


@attrs.frozen
class CouplingHint:
    """`coupling[]` of a result: `uri` (a changed file) usually changes with `partner` (repository-relative) —
    `rate` = `commits` of its `total` commits — and the change set did not touch it; `chance` is the predictor's
    estimate; `message` the sentence to show."""

    uri: str
    partner: str
    partnerUri: str
    rate: float
    commits: int
    total: int
    chance: float
    message: str
    line: int = 0  # 0-based: the changed file's first changed line (where the Hint diagnostic goes)


@attrs.frozen
class HistoryWarning:
    """`historyWarnings[]` of a run's result: the change rewrites line `line` (0-based, the first of a hunk) of
    `uri`, last changed by a recent fix."""

    uri: str
    line: int
    message: str


def _repository(session: Session, path: Path) -> tuple[HistoryService, str] | None:
    try:
        return service_for(session, path)
    except Exception as exc:  # noqa: BLE001 - a history check never fails a run
        log.info("no history checks for %s: %s", path, exc)
        return None


def _message(hint: Hint[bytes], changed: str, others: int) -> str:
    partner = hint.partner.decode("utf-8", "replace")
    if hint.rule == "changeset":
        return (
            f"{changed} and {others} other changed file{'s' if others != 1 else ''} usually change with {partner} "
            f"({round(hint.rate * 100)}%, {hint.commits} of {hint.total} commits that changed them all); not touched"
        )
    recent = f", {hint.recent} of its last 3" if hint.recent >= 2 and hint.total > 3 else ""
    return (
        f"{changed} usually changes with {partner} ({round(hint.rate * 100)}%, {hint.commits} of {hint.total} "
        f"commits{recent}); not touched"
    )


def coupling_hints(
    session: Session, files: Sequence[tuple[Path, str, int]], buffer: Callable[[Path], str | None] | None = None
) -> list[CouplingHint]:
    """Hints for a change set touching `files` ((path, uri, first changed line) each; the first names the
    repository). `buffer(path)`: the editor's text of an open file (a partner changed there is not hinted)."""
    hs = session.settings.history
    if not hs.coupling or not files:
        return []
    found = _repository(session, files[0][0])
    if found is None:
        return []
    service, _rel = found
    if not service.ready:
        service.wait_ready(READY_WAIT)  # a small repository's index is built in well under a second
    root = service.root
    rels: list[str] = []
    uris: dict[bytes, tuple[str, int]] = {}
    for path, uri, line in files:
        try:
            rel = Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            continue  # another repository's file: its own hints would need its own history
        rels.append(rel)
        uris[rel.encode("utf-8", "surrogateescape")] = (uri, line)
    gathered = service_evidence(service, rels, hs.maxCommits, hs.maxChangesetFiles)
    if gathered is None:
        return []
    evidence, alive = gathered
    touched = [r.encode("utf-8", "surrogateescape") for r in rels]
    ranked = predict(
        touched,
        evidence,
        min_rate=hs.couplingMinRate,
        min_commits=hs.couplingMinCommits,
        limit=2 * HINTS,
        name=lambda p: p.decode("utf-8", "replace"),
        exists=lambda p: p in alive and (root / p.decode("utf-8", "surrogateescape")).exists(),
    )

    # a partner already changed in the work tree (by you, or an earlier run) is part of the change being made
    def buffered(partner: bytes) -> bytes | None:
        text = buffer(root / partner.decode("utf-8", "surrogateescape")) if buffer is not None else None
        return text.encode("utf-8") if text is not None else None

    edited = changed_since_head(service, [h.partner for h in ranked], session.settings.maxFileBytes, buffered)
    hints = [h for h in ranked if h.partner not in edited][:HINTS]
    out = []
    for h in hints:
        changed = h.path.decode("utf-8", "replace")
        partner_path = root / h.partner.decode("utf-8", "surrogateescape")
        uri, line = uris.get(h.path, ("", 0))
        out.append(
            CouplingHint(
                uri,
                h.partner.decode("utf-8", "replace"),
                partner_path.as_uri(),
                round(h.rate, 4),
                h.commits,
                h.total,
                round(h.chance, 4),
                _message(h, changed, len(rels) - 1),
                line,
            )
        )
    return out


def _ago(seconds: float) -> str:
    days = int(seconds // 86400)
    if days >= 1:
        return f"{days} day{'s' if days != 1 else ''} ago"
    hours = int(seconds // 3600)
    if hours >= 1:
        return f"{hours} hour{'s' if hours != 1 else ''} ago"
    return "just now"


def fix_warnings(session: Session, path: Path, base_text: str, start: int, end: int) -> list[str]:
    """Warnings for rewriting lines [start, end) (0-based) of `path`, whose text at HEAD is assumed `base_text`."""
    hs = session.settings.history
    if not hs.coupling or hs.recentFixDays <= 0 or end <= start:
        return []
    found = _repository(session, path)
    if found is None:
        return []
    service, rel = found
    entry = service.entry(rel, hs, sync=False, wait=BLAME_WAIT)
    if entry is None:
        return []
    now = time.time()
    seen: dict[str, str] = {}
    for line in range(start, min(end, start + MAX_LINES)):
        commit, _why = service.line_commit(rel, line + 1, entry, wait=BLAME_WAIT if line == start else 0.0)
        if commit is None or commit.hash in seen or now - commit.time > hs.recentFixDays * 86400:
            continue
        summary = service.summaries.get(commit.hash, commit.path) or ""
        if not (FIX.search(commit.subject) or FIX.search(summary)):
            continue
        seen[commit.hash] = (
            f"changes lines from {commit.hash[:7]} '{commit.subject}' ({commit.author}, {_ago(now - commit.time)})"
        )
    return list(seen.values())


async def history_checks(
    session: Session, port: EditorPort, changes: Sequence[FileChange]
) -> tuple[list[CouplingHint] | None, list[HistoryWarning] | None]:
    """`coupling` and `historyWarnings` of a run's change set (None when there is nothing to say). The work runs in
    a thread; the editor's buffers are read on the event loop."""
    if not changes or not session.settings.history.coupling:
        return None, None
    loop = asyncio.get_running_loop()

    async def read(path: Path) -> str | None:
        found = port.read_buffer(path)
        return found.text if found is not None else None

    def buffer(path: Path) -> str | None:  # from the worker thread
        return asyncio.run_coroutine_threadsafe(read(path), loop).result(BUFFER_WAIT)

    return await asyncio.to_thread(_checks, session, changes, buffer)


def _checks(
    session: Session, changes: Sequence[FileChange], buffer: Callable[[Path], str | None]
) -> tuple[list[CouplingHint] | None, list[HistoryWarning] | None]:
    try:
        from nagent_lsp.text.merge import line_hunks

        hunks = [line_hunks(c.base_text, c.new_text) for c in changes]  # one diff per file (issue 29)
        files = [(c.path, c.uri, h[0].start if h else 0) for c, h in zip(changes, hunks, strict=True)]
        hints = coupling_hints(session, files, buffer)
        warnings: list[HistoryWarning] = []
        for change, found in zip(changes, hunks, strict=True):
            if change.created:
                continue
            for hunk in found:
                for message in fix_warnings(session, change.path, change.base_text, hunk.start, hunk.end):
                    warnings.append(HistoryWarning(change.uri, hunk.start, message))
    except Exception:  # noqa: BLE001 - a history check never fails a run; say so in the log
        log.warning("history checks of the change set failed", exc_info=True)
        return None, None
    return hints or None, warnings or None


def review_checks(session: Session, view: V, proposal: ProposalRecord) -> V:
    """`nagent.review.show` with the history checks: each pending hunk's `warnings` and the proposal's
    `coupling` (over every file it touches)."""
    if not session.settings.history.coupling:
        return view
    try:
        records = {f.uri: f for f in proposal.files}
        files = []
        for shown in view.files:  # type: ignore[attr-defined]
            record = records.get(shown.uri)
            hunks = {h.id: h for h in record.hunks} if record is not None else {}
            placed = []
            for hunk in shown.hunks:
                stored = hunks.get(hunk.id)
                found = (
                    fix_warnings(session, Path(record.path), record.baseText, stored.start, stored.end)
                    if record is not None and stored is not None and not record.created
                    else []
                )
                placed.append(attrs.evolve(hunk, warnings=found or None))
            files.append(attrs.evolve(shown, hunks=placed))
        firsts = {f.uri: min((h.start for h in f.hunks), default=0) for f in proposal.files}
        hints = coupling_hints(session, [(Path(f.path), f.uri, firsts[f.uri]) for f in proposal.files])
    except Exception:  # noqa: BLE001 - the review is shown without them rather than not at all
        log.warning("history checks of proposal %s failed", proposal.id, exc_info=True)
        return view
    return attrs.evolve(view, files=files, coupling=hints or None)  # type: ignore[misc]


__all__ = ["CouplingHint", "HistoryWarning", "coupling_hints", "fix_warnings", "history_checks", "review_checks"]
