"""Change sets and their review (DESIGN §9): delivering a run's change set, proposals, `nagent.review.*`.

A run's change set is applied at once or, with `confirmEdits`/`preview`, kept as a proposal (`propose`) under
`<state root>/proposals/<id>/` (`operations/deliver.py` decides which). A proposal's hunks are the changed line
regions of each file against the text the run started from; their ids (`h1`, `h2`, … across the proposal) never
change. Resolving:

- `nagent.review.apply {id, accept?, rest?}` merges the accepted hunks three ways into the current text of each
  file and sends them as one change (`operations/apply.apply_change_set`), the proposal's new record written with
  it (the CLI: in the same transaction, so a crash never leaves the files changed and the proposal pending); a hunk
  whose own lines changed is a conflict (left out, reported saying which lines changed), a hunk next to a change
  still applies. The hunks not accepted are rejected (`rest: "reject"`, the default) or stay pending (`rest:
  "keep"`: what "accept this change" uses). Nothing is recorded when the editor refuses the change: the proposal
  stays as it was.
- `nagent.review.discard {id, hunks?}` rejects every pending hunk, or only `hunks` (the rest stay pending).

Every resolution appends a `<nagent-review-result>` block to the run's conversation naming the accepted hunks and
the rejected ones with their text, so the next request knows what the user refused. While hunks are pending the
port shows them (`EditorPort.publish_review`: Hint diagnostics over LSP).

Trust (DESIGN §12): a proposal is only used when `store.proposals` verified this user's MAC on it; one that is
not (a clone brought it, or it was edited) is never listed, shown, placed as a diagnostic, applied or discarded,
and is reported once per server (`announce`). Every path of a proposal that is used is confined again, when it is
used (`confine`): each file (and the target) inside a workspace folder by the read rules, not under a denyWrite
pattern nor in the state root, a regular file or a new file; the conversation inside the state root's
`conversations/`. The current text of each file is read through the bounded reader (`maxFileBytes`), off the
event loop where the command is asynchronous.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Final, Literal

import attrs

from nagent_lsp.agent.confine import containing_folder, denied_at_any_depth
from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.core.ports import EditorPort, FileChange, FileOutcome, RecordWrite, ReviewMark
from nagent_lsp.operations.apply import FileResult, apply_change_set, change_patch, shown_path
from nagent_lsp.operations.args import NoArgs, ReviewApplyArgs, ReviewDiscardArgs, ReviewIdArgs
from nagent_lsp.operations.buffers import workspace_of
from nagent_lsp.operations.coupling import CouplingHint
from nagent_lsp.operations.session import Session
from nagent_lsp.store import proposals
from nagent_lsp.store.conversations import ConversationError, ConversationStore
from nagent_lsp.store.proposals import AnyText, ConversationRecord, FileRecord, HunkRecord, HunkStatus, ProposalRecord
from nagent_lsp.tags.transcript import render_block
from nagent_lsp.text.edits import split_lines
from nagent_lsp.text.merge import HunkConflict, LineHunk, Placed, line_hunks, merge_hunks, place_hunks

log = logging.getLogger("nagent_lsp")

PENDING: Final = "pending"
ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"
CONFLICT: Final = "conflict"
_locks: dict[str, asyncio.Lock] = {}


# -- the commands' results (the README's contract; camelCase as on the wire) -----------------------------
@attrs.frozen
class Position:
    line: int
    character: int


@attrs.frozen
class Range:
    start: Position
    end: Position


@attrs.frozen
class HunkView:
    """A pending hunk placed in its document's current text: `range` is whole lines (where its lines were, when
    `applies` is false: they changed since)."""

    id: str
    range: Range
    oldText: str
    newText: str
    applies: bool
    warnings: list[str] | None = None  # issue 26: "changes lines from abc1234 'Fix …' (Alice, 3 days ago)"


@attrs.frozen
class FileView:
    uri: str
    path: str
    created: bool
    hunks: list[HunkView]


@attrs.frozen
class ProposalView:
    """`nagent.review.show`: a pending proposal's pending hunks, file by file (also the `proposal` of a run's result
    when its change set awaits review)."""

    id: str
    createdAt: str
    request: str
    conversation: ConversationRecord
    files: list[FileView]
    coupling: list[CouplingHint] | None = None  # issue 26: files that usually change with these, untouched


@attrs.frozen
class ListedFile:
    uri: str
    hunks: int  # the pending ones


@attrs.frozen
class ListedProposal:
    id: str
    createdAt: str
    request: str
    conversation: ConversationRecord
    files: list[ListedFile]


@attrs.frozen
class ReviewList:
    """`nagent.review.list`: the pending proposals of the workspace."""

    proposals: list[ListedProposal]


@attrs.frozen
class ReviewApplied:
    """`nagent.review.apply`: the accepted hunks applied as one change (`files`, its `patchPath`), or why not."""

    applied: bool
    edits: int
    files: list[FileResult]
    rejected: list[str]
    conflicts: list[str]
    pending: list[str]
    patchPath: str | None = None
    reason: str | None = None


@attrs.frozen
class ReviewDiscarded:
    """`nagent.review.discard`: the hunks rejected now, and those still pending."""

    rejected: list[str]
    pending: list[str]


# -- proposals ------------------------------------------------------------------------------------------
def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_proposal(
    changes: Sequence[FileChange], *, request: str, conversation: ConversationRecord, target: Path
) -> ProposalRecord:
    """A proposal (as stored) of the change set: per file its base and proposed text and its hunks."""
    files, count = [], 0
    for change in changes:
        hunks = []
        for hunk in line_hunks(change.base_text, change.new_text) or [LineHunk(0, 0, "", "")]:
            count += 1
            old, new = AnyText(hunk.old_text), AnyText(hunk.new_text)
            hunks.append(HunkRecord(f"h{count}", hunk.start, hunk.end, old, new, PENDING))
        base, new_text = AnyText(change.base_text), AnyText(change.new_text)
        files.append(FileRecord(change.uri, str(change.path), change.created, base, new_text, hunks))
    return ProposalRecord(
        version=1,
        id=proposals.new_id(),
        createdAt=_now(),
        status=PENDING,
        request=AnyText(request),
        conversation=conversation,
        target=str(target),
        files=files,
    )


def propose(
    session: Session,
    port: EditorPort,
    state_root: Path,
    changes: Sequence[FileChange],
    *,
    request: str,
    conversation: ConversationRecord,
    target: Path,
) -> ProposalView:
    """Store the change set as a proposal (nothing applied), show its hunks; returns `nagent.review.show`'s view."""
    proposal = build_proposal(changes, request=request, conversation=conversation, target=target)
    patch = change_patch(state_root, ((c.path, c.base_text, c.new_text, c.created) for c in changes))
    session.proposal_index(state_root).create(proposal, patch)
    publish(session, port, [f.uri for f in proposal.files])
    # The files were just read by the run, within maxFileBytes: their texts are taken here, on the loop.
    rules = proposal_rules(session, state_root)
    texts = {}
    for change in changes:
        try:
            texts[str(change.path)] = _current(port, change.path, rules)[0]
        except Refused:
            texts[str(change.path)] = change.base_text
    return review_view(proposal, texts)


def state_roots(session: Session, also: Path | None = None) -> list[Path]:
    """Where this workspace's proposals live: the state root of each workspace folder (or the stateRoot setting),
    then every other state root the session has used inside a workspace folder — a nested repository has its own
    (`config/state_root.py`) — and `also` (the state root of the file asked about)."""
    roots: list[Path] = []
    for folder in session.workspace_folders or [None]:  # type: ignore[list-item]
        root = session.state_root(folder).path
        if root not in roots:
            roots.append(root)
    if also is not None and also not in roots:
        roots.append(also)
    for root in session.state_roots_used():
        if root not in roots and any(root.parent.is_relative_to(f) for f in session.workspace_folders):
            roots.append(root)
    return roots


def pending_proposals(session: Session, also: Path | None = None) -> list[tuple[Path, ProposalRecord]]:
    """Every pending proposal of the workspace (`state_roots`), from each root's in-memory index (frozen records)."""
    return [(root, p) for root in state_roots(session, also) for p in session.proposal_index(root).pending()]


def _ignored(rejected: proposals.Rejected) -> str:
    if rejected.foreign:
        return (
            f"proposal {rejected.id} was not made by this server for this user; it is ignored and left untouched "
            f"({rejected.reason})"
        )
    return f"proposal {rejected.id} is ignored and left untouched: {rejected.reason}"


def _find(session: Session, proposal_id: str) -> tuple[Path, ProposalRecord, Confined]:
    """The pending proposal, its state root and its paths confined for use;
    InvalidArgument naming `id` when there is no such proposal, it was resolved, it is not this user's own (or
    malformed), or one of its paths may not be used now."""
    if not proposals.valid_id(proposal_id):
        raise InvalidArgument("id", "is not a proposal id (they look like p20250101T120000Z-1a2b3c4d)")
    roots = state_roots(session)
    for root in roots:
        index = session.proposal_index(root)
        for proposal in index.pending():
            if proposal.id == proposal_id:
                return root, proposal, confine(session, root, proposal)
        rejected = index.rejected(proposal_id)
        if rejected is not None:
            raise InvalidArgument("id", _ignored(rejected))
    for root in roots:
        found = proposals.read(root, proposal_id)
        if isinstance(found, proposals.Rejected):
            raise InvalidArgument("id", _ignored(found))
        if found is not None:
            raise InvalidArgument("id", f"proposal {proposal_id} was already resolved ({found.get('status')})")
    raise InvalidArgument("id", f"no proposal {proposal_id} in this workspace")


# -- where a proposal's paths may point, checked when they are used ---------------------------------------
MAX_PATH_CHARS = 4096  # PATH_MAX: a longer "path" is no file name


@dataclass(frozen=True)
class Confined:
    """A proposal's paths as they may be used now: each file's (by its stored path), the target, the
    conversation; and the read rules its files are read with."""

    rules: ReadRules
    files: dict[str, Path]
    target: Path
    conversation: Path


def proposal_rules(session: Session, root: Path) -> ReadRules:
    """The read rules of a state root's proposals: the workspace folders (none open: the root's repository)."""
    settings = session.settings
    return ReadRules.of(workspace_of(session, root), settings.denyRead, settings.maxFileBytes)


def confine_file(session: Session, root: Path, rules: ReadRules, path_str: object) -> Path:
    """Where a proposal's file may be read and written now (resolved), or `Refused`: inside a workspace folder
    by the read rules, not its folder itself, not in the state root, under no denyWrite pattern (on every tail
    of the path, as the model's writes are judged), an existing regular file or a new one whose existing parent
    is a folder inside the workspace."""
    if not isinstance(path_str, str) or not path_str or len(path_str) > MAX_PATH_CHARS:
        raise Refused("a file path is empty, not a string or too long to be a path")
    if not os.path.isabs(path_str):
        raise Refused(f"{path_str[:200]!r} is not an absolute path")
    resolved = rules.confine(path_str)
    folder = containing_folder(resolved, rules.folders)
    if folder is None or resolved == folder:
        raise Refused(f"{path_str} is a workspace folder, not a file")
    state = root.resolve()
    if resolved == state or state in resolved.parents:
        raise Refused(f"{path_str} is in nagent's state folder {state}")
    lexical = Path(os.path.normpath(path_str))
    for candidate in (resolved, lexical):
        base = containing_folder(candidate, rules.folders)
        if base is None:
            continue
        relative = PurePosixPath(candidate.relative_to(base).as_posix())
        glob = denied_at_any_depth(relative, session.settings.denyWrite)
        if glob is not None:
            raise Refused(f"{path_str} matches the denyWrite pattern {glob!r}")
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        parent = resolved.parent
        while parent != folder and not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise Refused(f"{path_str} cannot be created ({parent} is not a folder)") from None
        return resolved
    except OSError as exc:
        raise Refused(f"{path_str} cannot be examined ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{path_str} is not a regular file")
    return resolved


def confine_conversation(root: Path, path_str: object) -> Path:
    """The conversation a proposal's review is recorded in: a file inside the state root's `conversations/`
    (resolved: no `..` nor link leads out of it), or `Refused`."""
    if not isinstance(path_str, str) or not path_str or len(path_str) > MAX_PATH_CHARS or "\0" in path_str:
        raise Refused("the conversation path is empty, not a string or too long to be a path")
    conversations = (root / "conversations").resolve()
    if not os.path.isabs(path_str):
        raise Refused(f"the conversation path {path_str[:200]!r} is not absolute")
    try:
        resolved = Path(path_str).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise Refused(f"the conversation path {path_str[:200]} cannot be resolved ({exc})") from None
    if conversations not in resolved.parents:
        raise Refused(f"the conversation {path_str[:200]} is not inside {conversations}")
    if resolved.exists() and not resolved.is_file():
        raise Refused(f"the conversation {path_str[:200]} is not a regular file")
    return resolved


def confine(session: Session, root: Path, proposal: ProposalRecord) -> Confined:
    """Every path of a proposal as it may be used now; InvalidArgument naming `id` (nothing read or written)
    when any may not: a MAC proves the server wrote the file, not that a folder was not swapped for a link
    since."""
    rules = proposal_rules(session, root)
    try:
        files = {f.path: confine_file(session, root, rules, f.path) for f in proposal.files}
        target = confine_file(session, root, rules, proposal.target)
        conversation = confine_conversation(root, proposal.conversation.path)
    except Refused as exc:
        raise InvalidArgument(
            "id", f"proposal {proposal.id} is refused: {exc.reason}; nothing was read or written"
        ) from None
    return Confined(rules, files, target, conversation)


def _current(port: EditorPort, path: Path, rules: ReadRules) -> tuple[str, bool]:
    """The file's text as the user has it (buffer, else the disk through the bounded reader, within
    maxFileBytes) and whether it exists; `Refused` when it may not be read."""
    buffer = port.read_buffer(path)
    if buffer is not None:
        return buffer.text, True
    return _disk(path, rules)


def _disk(path: Path, rules: ReadRules) -> tuple[str, bool]:
    try:
        return rules.read_text(path), True
    except Refused as exc:
        if exc.kind == "missing":
            return "", False
        raise


async def _current_async(port: EditorPort, path: Path, rules: ReadRules) -> tuple[str, bool]:
    """`_current` with the buffer taken on the loop (documents live there) and the disk read in a thread."""
    buffer = port.read_buffer(path)
    if buffer is not None:
        return buffer.text, True
    return await asyncio.to_thread(_disk, path, rules)


async def _texts(port: EditorPort, proposal: ProposalRecord, confined: Confined) -> dict[str, str]:
    """The current text of each file with a pending hunk, by stored path; UserError when one cannot be read."""
    texts: dict[str, str] = {}
    for file in proposal.files:
        if not _pending(file):
            continue
        try:
            texts[file.path] = (await _current_async(port, confined.files[file.path], confined.rules))[0]
        except Refused as exc:
            raise UserError(f"proposal {proposal.id}: {exc.reason}") from None
    return texts


def _pending(file: FileRecord) -> list[HunkRecord]:
    return [h for h in file.hunks if h.status == PENDING]


def placed(file: FileRecord, hunks: Sequence[HunkRecord], current: str) -> list[Placed]:
    """Where each of a proposal file's hunks is in the file's current text (`text.merge.place_hunks`): the one
    placement `nagent.review.show` and the zero-plugin diagnostics share."""
    return place_hunks(file.baseText, current, [LineHunk(h.start, h.end, h.oldText, "") for h in hunks])


def review_view(proposal: ProposalRecord, texts: dict[str, str]) -> ProposalView:
    """`nagent.review.show`: the pending hunks, their ranges in each document's current text (`texts`, by stored
    path; whole lines), and whether each still applies (`applies: false`: its lines changed since; the range says
    where they were)."""
    files = []
    for file in proposal.files:
        hunks = _pending(file)
        if not hunks:
            continue
        current = texts.get(file.path, file.baseText)
        views = [
            HunkView(h.id, Range(Position(where.start, 0), Position(where.end, 0)), h.oldText, h.newText, where.found)
            for h, where in zip(hunks, placed(file, hunks, current), strict=True)
        ]
        files.append(FileView(file.uri, file.path, file.created, views))
    return ProposalView(proposal.id, proposal.createdAt, proposal.request, proposal.conversation, files)


def marks_for(session: Session, port: EditorPort | None, uri: str, text: str | None = None) -> list[ReviewMark]:
    """Every pending hunk of every pending proposal on the document `uri`, placed in its current text (`text`,
    else the port's buffer, else the disk) as `nagent.review.show` places it. A hunk whose lines changed since is
    still shown (where they were), its message saying it no longer applies: the user can still reject it, and
    accepting it reports the conflict."""
    marks: list[ReviewMark] = []
    path = uri_to_path(uri)
    also = session.state_root(path).path if path is not None else None
    rules: dict[Path, ReadRules] = {}
    for root, proposal in pending_proposals(session, also):
        for file in proposal.files:
            if file.uri != uri and (path is None or file.path != str(path)):
                continue
            hunks = _pending(file)
            if not hunks:
                continue
            root_rules = rules.get(root) or rules.setdefault(root, proposal_rules(session, root))
            try:
                where_now = confine_file(session, root, root_rules, file.path)
                if text is not None:
                    current = text
                elif port is not None:
                    current = _current(port, where_now, root_rules)[0]
                else:
                    current = file.baseText
            except Refused as exc:
                log.info("the hunks of proposal %s are not shown on %s: %s", proposal.id, uri, exc.reason)
                continue
            for hunk, where in zip(hunks, placed(file, hunks, current), strict=True):
                first = next((line.strip() for line in split_lines(hunk.newText) if line.strip()), "")
                message = f"nagent proposes: {first[:120]}" if first else "nagent proposes to delete these lines"
                if not where.found:
                    what = f": {first[:120]}" if first else " (a deletion)"
                    message = f"nagent's proposed change no longer applies (these lines changed since){what}"
                marks.append(ReviewMark(proposal.id, hunk.id, where.start, where.end, message))
    return marks


def publish(session: Session, port: EditorPort, uris: Iterable[str]) -> None:
    for uri in dict.fromkeys(uris):
        try:
            port.publish_review(uri, marks_for(session, port, uri))
        except (OSError, UserError) as exc:
            log.info("could not show the review of %s: %s", uri, exc)


# -- proposals this server did not make -------------------------------------------------------------------
def announce(session: Session, port: EditorPort, also: Path | None = None) -> list[str]:
    """Report, once per server, the pending-marked proposals that are not used: those this server did not make
    for this user (one message per state root) and malformed ones of its own (one each). Returns the messages
    (each also goes to `port.log` as a warning: the editor's window message, the CLI's stderr)."""
    messages: list[str] = []
    for root in state_roots(session, also):
        fresh = session.proposal_index(root).unreported()
        foreign = [r for r in fresh if r.foreign]
        if foreign:
            names = ", ".join(r.id for r in foreign)
            plural = "s" if len(foreign) != 1 else ""
            text = (
                f"ignored {len(foreign)} proposal{plural} this server did not make: {names} "
                f"(in {root / proposals.PROPOSALS}; left untouched)"
            )
            unchecked = next((r.reason for r in foreign if "cannot be checked" in r.reason), None)
            messages.append(text + (f"; {unchecked}" if unchecked else ""))
        messages += [f"ignored proposal {r.id}: {r.reason} (left untouched)" for r in fresh if not r.foreign]
    for message in messages:
        port.log("warning", message)
    return messages


# -- the commands -----------------------------------------------------------------------------------------
def review_list(session: Session, port: EditorPort, args: NoArgs) -> ReviewList:
    announce(session, port)
    listed = []
    for _root, p in pending_proposals(session):
        files = [ListedFile(f.uri, len(_pending(f))) for f in p.files if _pending(f)]
        listed.append(ListedProposal(p.id, p.createdAt, p.request, p.conversation, files))
    return ReviewList(listed)


async def review_show(session: Session, port: EditorPort, args: ReviewIdArgs) -> ProposalView:
    announce(session, port)
    _root, proposal, confined = _find(session, args.id)
    view = review_view(proposal, await _texts(port, proposal, confined))
    from nagent_lsp.operations.coupling import review_checks

    return await asyncio.to_thread(review_checks, session, view, proposal)


def _lock(proposal_id: str) -> asyncio.Lock:
    lock = _locks.get(proposal_id)
    if lock is None:
        lock = _locks[proposal_id] = asyncio.Lock()
    return lock


def _check_hunks(proposal: ProposalRecord, wanted: list[str] | None, field: str) -> set[str]:
    pending = {h.id for f in proposal.files for h in _pending(f)}
    if wanted is None:
        return pending
    every = {h.id for f in proposal.files for h in f.hunks}
    for hunk_id in wanted:
        if hunk_id not in every:
            raise InvalidArgument(field, f"proposal {proposal.id} has no hunk {hunk_id!r}")
        if hunk_id not in pending:
            raise InvalidArgument(field, f"hunk {hunk_id} of proposal {proposal.id} was already resolved")
    return set(wanted)


async def review_apply(session: Session, port: EditorPort, args: ReviewApplyArgs) -> ReviewApplied:
    announce(session, port)
    _find(session, args.id)  # a bad id fails before a lock is made for it
    async with _lock(args.id):
        root, proposal, confined = _find(session, args.id)  # again: another command may have resolved it meanwhile
        accept = _check_hunks(proposal, args.accept, "accept")
        changes, conflicts = await _merged(port, root, proposal, confined, accept)
        reason = None
        if conflicts:
            rest = "the other accepted hunks were applied" if changes else "nothing was applied"
            reason = f"conflict: {'; '.join(why for _id, why in conflicts)}; {rest}"
        # The proposal's new record is decided before the change is sent, so that it is written with the change
        # (one transaction on the disk): the files changed and the proposal still pending is never what is left.
        statuses, accepted, rejected, conflicted = _resolve(proposal, accept, {h for h, _why in conflicts}, args.rest)
        proposal = with_statuses(proposal, statuses)
        result = ReviewApplied(
            applied=False,
            edits=0,
            files=[],
            rejected=[h.id for _f, h in rejected],
            conflicts=[hunk_id for hunk_id, _why in conflicts],
            pending=[h.id for f in proposal.files for h in _pending(f)],
            reason=reason,
        )
        index = session.proposal_index(root)
        outcome_files: tuple[FileOutcome, ...] = ()
        if changes:
            record = [RecordWrite(path, text) for path, text in proposals.saved_files(root, proposal)]
            applied = await apply_change_set(
                session,
                port,
                root,
                changes,
                target=confined.target,
                request=proposal.request,
                conversation=confined.conversation.name,
                also=record,
            )
            if not applied.outcome.applied:
                return ReviewApplied(False, 0, [], [], [], [], reason=applied.outcome.reason or "not applied")
            index.saved(proposal)
            outcome_files = applied.outcome.files
            patch = str(applied.patch) if applied.patch is not None else None
            result = attrs.evolve(
                result, applied=True, edits=applied.outcome.edits, files=list(applied.files), patchPath=patch
            )
        else:
            index.save(proposal)
        await _record_review(session, port, proposal, confined, accepted, rejected, conflicted)
        publish(session, port, [f.uri for f in proposal.files] + [f.uri for f in outcome_files])
        return result


async def _merged(
    port: EditorPort, root: Path, proposal: ProposalRecord, confined: Confined, accept: set[str]
) -> tuple[list[FileChange], list[tuple[str, str]]]:
    """The accepted hunks merged into each file's current text: the change set to send, and the hunks left out
    with why (which lines changed since, as `HunkConflict.why` says it)."""
    changes: list[FileChange] = []
    conflicts: list[tuple[str, str]] = []
    for file in proposal.files:
        chosen = [h for h in _pending(file) if h.id in accept]
        if not chosen:
            continue
        path = confined.files[file.path]
        try:
            current, exists = await _current_async(port, path, confined.rules)
        except Refused as exc:
            raise UserError(f"proposal {proposal.id}: {exc.reason}; nothing was applied") from None
        hunks = [LineHunk(h.start, h.end, h.oldText, h.newText) for h in chosen]
        base = file.baseText
        failed: list[HunkConflict]
        if file.created and not exists:
            merged, failed = merge_hunks(base, base, hunks)
        else:
            merged, failed = merge_hunks(base, current, hunks)
        where = shown_path(root, Path(file.path))
        conflicts += [(chosen[c.index].id, f"{c.why(chosen[c.index].id)} in {where}") for c in failed]
        if merged != current or (file.created and not exists):
            buffer = port.read_buffer(path)
            changes.append(
                FileChange(
                    path=path,
                    uri=buffer.uri if buffer is not None else path.as_uri(),
                    base_text=current,
                    new_text=merged,
                    base_version=buffer.version if buffer is not None else None,
                    created=file.created and not exists,
                )
            )
    return changes, conflicts


FileHunk = tuple[FileRecord, HunkRecord]  # a proposal's file and one of its hunks


def _resolve(
    proposal: ProposalRecord, accept: set[str], conflicts: set[str], rest: str
) -> tuple[dict[str, HunkStatus], list[HunkRecord], list[FileHunk], list[FileHunk]]:
    """Each pending hunk's new status (by hunk id): conflict, accepted, rejected (the rest, unless `rest` is
    "keep"); and the hunks accepted, rejected and conflicting."""
    statuses: dict[str, HunkStatus] = {}
    accepted: list[HunkRecord] = []
    rejected: list[FileHunk] = []
    conflicted: list[FileHunk] = []
    for file in proposal.files:
        for hunk in _pending(file):
            if hunk.id in conflicts:
                statuses[hunk.id] = CONFLICT
                conflicted.append((file, hunk))
            elif hunk.id in accept:
                statuses[hunk.id] = ACCEPTED
                accepted.append(hunk)
            elif rest == "reject":
                statuses[hunk.id] = REJECTED
                rejected.append((file, hunk))
    return statuses, accepted, rejected, conflicted


async def review_discard(session: Session, port: EditorPort, args: ReviewDiscardArgs) -> ReviewDiscarded:
    announce(session, port)
    _find(session, args.id)
    async with _lock(args.id):
        root, proposal, confined = _find(session, args.id)
        chosen = _check_hunks(proposal, args.hunks, "hunks")
        rejected = [(f, h) for f in proposal.files for h in _pending(f) if h.id in chosen]
        proposal = with_statuses(proposal, {h.id: REJECTED for _f, h in rejected})
        session.proposal_index(root).save(proposal)
        await _record_review(session, port, proposal, confined, [], rejected, [])
        publish(session, port, [f.uri for f in proposal.files])
        return ReviewDiscarded(
            rejected=[h.id for _f, h in rejected], pending=[h.id for f in proposal.files for h in _pending(f)]
        )


def with_statuses(proposal: ProposalRecord, statuses: dict[str, HunkStatus]) -> ProposalRecord:
    """The proposal with its hunks' new `statuses` (by hunk id). With no pending hunk left it is resolved:
    `applied` when any hunk was accepted, else `discarded`."""
    files = [
        attrs.evolve(f, hunks=[attrs.evolve(h, status=statuses.get(h.id, h.status)) for h in f.hunks])
        for f in proposal.files
    ]
    hunks = [h for f in files for h in f.hunks]
    if any(h.status == PENDING for h in hunks):
        return attrs.evolve(proposal, files=files)
    status: Literal["applied", "discarded"] = "applied" if any(h.status == ACCEPTED for h in hunks) else "discarded"
    return attrs.evolve(proposal, files=files, status=status, resolvedAt=_now())


def _lines(hunk: HunkRecord) -> str:
    return f"{hunk.start + 1}-{max(hunk.end, hunk.start + 1)}"


async def _record_review(
    session: Session,
    port: EditorPort,
    proposal: ProposalRecord,
    confined: Confined,
    accepted: list[HunkRecord],
    rejected: list[FileHunk],
    conflicted: list[FileHunk],
) -> None:
    """The `<nagent-review-result>` block in the run's conversation: accepted hunks, and the rejected (and
    conflicting) ones with their text, so the next request knows what the user refused."""
    root = session.state_root(confined.target).path  # paths named relative to it: shared conversations travel
    lines = [f"The user reviewed the change proposed for the request: {proposal.request.strip()}"]
    if accepted:
        lines.append(f"Accepted and applied: {', '.join(h.id for h in accepted)}.")
    for title, group in (
        ("Rejected by the user", rejected),
        ("Not applied, its lines changed since the proposal was made", conflicted),
    ):
        for file, hunk in group:
            lines += [
                "",
                f"{title}: {hunk.id} in {shown_path(root, Path(file.path))} (lines {_lines(hunk)} of the text the "
                "change was made against).",
                "Proposed text:",
                hunk.newText.rstrip("\n") or "(delete the lines)",
                "Instead of:",
                hunk.oldText.rstrip("\n") or "(nothing: an insertion)",
            ]
    block_attrs = {
        "proposal": proposal.id,
        "accepted": " ".join(h.id for h in accepted),
        "rejected": " ".join(h.id for _f, h in rejected),
        "conflicts": " ".join(h.id for _f, h in conflicted),
    }
    block = render_block("nagent-review-result", "\n".join(lines), block_attrs)
    path, target = confined.conversation, confined.target
    try:
        from nagent_lsp.operations.conversation import store_for

        store: ConversationStore = store_for(session, target)
        ref = store.resolve(target)
        if ref.conversation_path.resolve() != path:  # the conversation was cleared or loaded since: write where it was
            ConversationFile.open(path, port).append(block)
            return
        async with store.lock_for(ref):
            ConversationFile.open(path, port).append(block)
    except (ConversationError, OSError) as exc:
        log.warning("could not record the review of %s in %s: %s", proposal.id, path, exc)
