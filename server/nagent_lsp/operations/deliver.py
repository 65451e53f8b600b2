"""The end of every run that made a change set (`nagent.edit`, a recipe's new `fileText`): propose it or apply it
(DESIGN §9), and say which in a typed `Delivery`.

A change set is kept as a proposal awaiting review (`operations/review.propose`) when the run asked for a preview
(`confirmEdits` or the argument) or when it must be reviewed whatever they say (`must_review`: a file a tool runs by
itself later, DESIGN §12); else it is applied as one change (`operations/apply.apply_change_set`). Every front end
(LSP, CLI, the next one) ends a run here: the port only sends or writes what the one planner planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Self

import attrs

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.config.convert import to_wire, wire_converter
from nagent_lsp.core.ports import ApplyOutcome, EditorPort, FileChange, Progress
from nagent_lsp.llm.tokens import TokenCounts
from nagent_lsp.operations.apply import FileResult, apply_change_set
from nagent_lsp.operations.coupling import CouplingHint, HistoryWarning, history_checks
from nagent_lsp.operations.review import ProposalView, propose
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationRef
from nagent_lsp.store.proposals import AnyText, ConversationRecord
from nagent_lsp.tags.transcript import render_block

AWAITING = "awaiting review"


@attrs.frozen
class Delivery:
    """What became of a run's change set, as the command's result says it (camelCase on the wire, None fields
    left out): `applied` with its `edits`, `files` and `patchPath`; or not applied and why (`reason`), with the
    `proposal` (`nagent.review.show`'s shape) when it awaits review and `reviewRequired` when review was forced.
    `outcome` (the port's, with each file's final text) is for the caller, never on the wire."""

    applied: bool
    edits: int = 0
    files: list[FileResult] = attrs.Factory(list)
    reason: str | None = None
    patchPath: str | None = None
    proposal: ProposalView | None = None
    reviewRequired: list[str] | None = None
    coupling: list[CouplingHint] | None = None  # issue 26: untouched partners (operations.coupling)
    historyWarnings: list[HistoryWarning] | None = None
    outcome: ApplyOutcome | None = attrs.field(default=None, eq=False, repr=False)

    def final_text(self, path: Path) -> str | None:
        """The text `path` was left with, when this change set was applied and changed it."""
        if self.outcome is None or not self.applied:
            return None
        return next((f.final_text for f in self.outcome.files if f.path == path), None)


def _delivery_on_the_wire(delivery: Delivery) -> dict[str, object]:
    """A `Delivery` as `to_wire` sends it: its fields but `outcome` (every file's whole text), None ones left out."""
    names = [f.name for f in attrs.fields(Delivery) if f.name != "outcome"]
    return {name: to_wire(value) for name in names if (value := getattr(delivery, name)) is not None}


wire_converter.register_unstructure_hook(Delivery, _delivery_on_the_wire)


def conversation_record(ref: ConversationRef) -> ConversationRecord:
    """The run's conversation as a result (and a proposal) names it: `{path, fileId}`."""
    return ConversationRecord(str(ref.conversation_path), AnyText(ref.file_id))


@attrs.frozen(kw_only=True)
class RunResult:
    """What a run that may change files answers (`nagent.edit`, `nagent.recipe.run`, `nagent.instruction.apply`):
    the model's `response`, the run's `conversation` and `tokens`, and what became of its change set (`delivered`,
    the `Delivery`'s fields). `files` is absent when the run ended before it had a change set (cancelled)."""

    applied: bool = False
    response: str = ""
    edits: int = 0
    files: list[FileResult] | None = None
    conversation: ConversationRecord
    tokens: TokenCounts
    patchPath: str | None = None
    reason: str | None = None
    proposal: ProposalView | None = None
    reviewRequired: list[str] | None = None
    coupling: list[CouplingHint] | None = None  # issue 26: files that usually change with these, untouched
    historyWarnings: list[HistoryWarning] | None = None  # issue 26: hunks over a recent fix's lines
    message: str = ""  # the one line a client shows, cost in USD (operations.edit_targets.with_message)

    def delivered(self, delivery: Delivery) -> Self:
        """This result with the delivery's outcome; a reason the run already gave (maxSteps) stays unless the
        delivery has its own."""
        return attrs.evolve(
            self,
            applied=delivery.applied,
            edits=delivery.edits,
            files=list(delivery.files),
            reason=delivery.reason if delivery.reason is not None else self.reason,
            patchPath=delivery.patchPath,
            proposal=delivery.proposal,
            reviewRequired=delivery.reviewRequired,
            coupling=delivery.coupling,
            historyWarnings=delivery.historyWarnings,
        )


def must_review(session: Session, changes: Sequence[FileChange]) -> list[str]:
    """Why this change set must be reviewed whatever confirmEdits or preview say (DESIGN §12); [] when it need not."""
    from nagent_lsp.agent.write_policy import review_reason

    folders, globs = session.workspace_folders, session.settings.reviewAlways
    return [why for change in changes if (why := review_reason(change.path, folders, globs))]


async def deliver_or_propose(
    session: Session,
    port: EditorPort,
    state_root: Path,
    changes: Sequence[FileChange],
    *,
    target: Path,
    request: str,
    convo: ConversationFile,
    conversation: ConversationRecord,
    progress: Progress,
    preview: bool,
) -> Delivery:
    """Propose the change set (`preview`, or `must_review`) or apply it as one change; the run's conversation
    (`convo`; `conversation` is its reference in the result) says which, and the progress ends with it. A change
    to a file a tool runs by itself later (`reviewAlways`, an exec bit) is always proposed."""
    must = must_review(session, changes)
    if must:
        preview = True
    delivery = await _deliver(
        session, port, state_root, changes, target, request, convo, conversation, progress, preview, must
    )
    # issue 26: what history says of the change set, for the result. Judged once the change is on its way, not before:
    # it reads HEAD's blame and the partners, which the change set's own files do not alter, and it diffs each file
    # again (a 10k-line file: ~60 ms); before the delivery, that held the edit back from the editor (issue 29).
    hints, warnings = await history_checks(session, port, changes)
    return attrs.evolve(delivery, coupling=hints, historyWarnings=warnings)


async def _deliver(
    session: Session,
    port: EditorPort,
    state_root: Path,
    changes: Sequence[FileChange],
    target: Path,
    request: str,
    convo: ConversationFile,
    conversation: ConversationRecord,
    progress: Progress,
    preview: bool,
    must: list[str],
) -> Delivery:
    if preview:
        proposal = propose(
            session, port, state_root, changes, request=request, conversation=conversation, target=target
        )
        from nagent_lsp.operations.attribution import note_proposed  # the run's model, for when review applies it

        note_proposed(session, state_root, convo.path.name, request)
        attrs_ = {"applied": "false", "reason": AWAITING, "proposal": proposal.id}
        convo.append(render_block("nagent-edit-result", None, attrs_))
        port.end_progress(progress, AWAITING)
        return Delivery(False, reason=AWAITING, proposal=proposal, reviewRequired=must or None)
    port.report_progress(progress, "applying the change")
    applied = await apply_change_set(
        session, port, state_root, changes, target=target, request=request, conversation=convo.path.name
    )
    outcome = applied.outcome
    if outcome.applied:
        patch = str(applied.patch) if applied.patch else None
        delivery = Delivery(True, outcome.edits, list(applied.files), patchPath=patch, outcome=outcome)
        block = {"applied": "true", "edits": outcome.edits, "files": len(outcome.files), "patch": applied.patch}
        convo.append(render_block("nagent-edit-result", None, block))
    elif outcome.conflict is not None:  # issue 25 item 9: what the user typed meanwhile wins; the change is kept
        reason = f"{outcome.reason or 'conflict'}; the change is kept as a proposal to review"
        proposal = propose(
            session, port, state_root, changes, request=request, conversation=conversation, target=target
        )
        delivery = Delivery(False, outcome.edits, reason=reason, proposal=proposal, outcome=outcome)
        block = {"applied": "false", "reason": reason, "proposal": proposal.id}
        convo.append(render_block("nagent-edit-result", None, block))
    else:
        delivery = Delivery(False, outcome.edits, reason=outcome.reason or "not applied", outcome=outcome)
        convo.append(render_block("nagent-edit-result", None, {"applied": "false", "reason": delivery.reason}))
    port.end_progress(progress, "applied" if outcome.applied else delivery.reason or "")
    return delivery
