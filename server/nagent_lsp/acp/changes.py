"""A run's change set in ACP (DESIGN §9): the engine keeps it as a proposal (on disk, so `nagent-lsp review` and
`nagent.review.*` see it); here it is shown as one `edit` tool call per file with the whole old and new text (a new
file has no old text) and a location at its first changed line (1-based), then one `session/request_permission`
for the set (Apply / Reject, and "Apply only F" per file when there are several). The answer goes through the
engine's own review commands: accepted hunks are applied by `operations.review.review_apply` (through the port:
`fs/write_text_file`, or the disk transaction), rejected ones recorded by `review_discard` — both write the
`<nagent-review-result>` the next turn reads.

What the client did afterwards in its own review (Zed's per-hunk keep/reject) is read back at the next prompt
(`read_back`): each applied hunk kept, reverted or changed, recorded as a `<nagent-review-result source="client">`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nagent_lsp.acp.port import AcpPort
from nagent_lsp.acp.sessions import Written
from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.operations.args import ReviewApplyArgs, ReviewDiscardArgs
from nagent_lsp.operations.review import ProposalView, review_apply, review_discard
from nagent_lsp.operations.session import Session
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.store.proposals import FileRecord, ProposalRecord
from nagent_lsp.tags.transcript import render_block
from nagent_lsp.text.merge import LineHunk, line_hunks

APPLY, REJECT = "apply", "reject"


def find_record(session: Session, view: ProposalView) -> ProposalRecord | None:
    from nagent_lsp.operations.review import pending_proposals

    return next((p for _root, p in pending_proposals(session) if p.id == view.id), None)


def edit_calls(port: AcpPort, record: ProposalRecord) -> list[tuple[str, FileRecord]]:
    """One pending `edit` tool call per file, with its diff; returns their ids with their files."""
    from acp.schema import FileEditToolCallContent, ToolCallLocation, ToolCallStart

    calls = []
    for file in record.files:
        call_id = port.next_id("edit")
        first = min((h.start for h in file.hunks), default=0)
        diff = FileEditToolCallContent(
            type="diff", path=file.path, old_text=None if file.created else file.baseText, new_text=file.newText
        )
        port.send(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=call_id,
                title=f"{'create' if file.created else 'edit'} {Path(file.path).name}",
                kind="edit",
                status="pending",
                content=[diff],
                locations=[ToolCallLocation(path=file.path, line=first + 1)],
                raw_input={"proposal": record.id, "hunks": [h.id for h in file.hunks]},
            )
        )
        calls.append((call_id, file))
    return calls


def _options(files: list[FileRecord]) -> list[Any]:
    from acp.schema import PermissionOption

    options = [
        PermissionOption(option_id=APPLY, name="Apply", kind="allow_once"),
        PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
    ]
    if len(files) > 1:
        options += [
            PermissionOption(option_id=f"only:{i}", name=f"Apply only {Path(f.path).name}", kind="allow_once")
            for i, f in enumerate(files)
        ]
    return options


async def review_change_set(session: Session, port: AcpPort, record: ProposalRecord, written_to: list[Written]) -> str:
    """Show, ask, then apply or reject; returns "applied", "rejected", "partial" or "cancelled" (nothing applied;
    the proposal stays pending for `nagent-lsp review`)."""
    from acp.schema import ToolCallProgress, ToolCallUpdate

    calls = edit_calls(port, record)
    files = [f for _id, f in calls]
    names = ", ".join(Path(f.path).name for f in files)
    ask = ToolCallUpdate(
        tool_call_id=port.next_id("changeset"),
        title=f"apply the change to {names}",
        kind="edit",
        status="pending",
        raw_input={"proposal": record.id, "files": [f.path for f in files]},
    )
    chosen = await port.request_permission(ask, _options(files))
    if chosen is None or any(p.cancelled for p in port.progresses):
        for call_id, _file in calls:
            port.send(ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, status="failed"))
        return "cancelled"
    if chosen == REJECT:
        await review_discard(session, port, ReviewDiscardArgs(id=record.id))
        for call_id, _file in calls:
            port.send(ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, status="failed"))
        return "rejected"
    wanted = files if chosen == APPLY else [files[int(chosen.split(":", 1)[1])]]
    accept = [h.id for f in wanted for h in f.hunks]
    port.last_applied = ()
    result = await review_apply(session, port, ReviewApplyArgs(id=record.id, accept=accept))
    for call_id, file in calls:
        ok = result.applied and file in wanted
        port.send(
            ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=call_id,
                status="completed" if ok else "failed",
                raw_output={"applied": ok, "reason": result.reason} if not ok else {"applied": True},
            )
        )
    if result.applied:
        _remember(port, record, wanted, written_to)
    return "applied" if result.applied and len(wanted) == len(files) else ("partial" if result.applied else "failed")


def _remember(port: AcpPort, record: ProposalRecord, wanted: list[FileRecord], written_to: list[Written]) -> None:
    kept = []
    for outcome in port.last_applied:
        file = next((f for f in wanted if Path(f.path) == outcome.path), None)
        ids = [h.id for h in file.hunks] if file is not None else []
        hunks = line_hunks(outcome.base_text, outcome.final_text)
        named = [(ids[i] if len(ids) == len(hunks) else f"h{i + 1}", h) for i, h in enumerate(hunks)]
        kept.append(
            (
                outcome.path,
                outcome.base_text,
                outcome.final_text,
                [(n, h.start, h.end, h.old_text, h.new_text) for n, h in named],
            )
        )
    written_to.append(Written(record.id, Path(record.conversation.path), kept))


def classify(written: str, current: str, hunks: list[tuple[str, int, int, str, str]]) -> dict[str, str]:
    """Each applied hunk (in the text before the write) as the client left it: kept, reverted or changed."""
    diffs = line_hunks(written, current)
    found: dict[str, str] = {}
    offset = 0
    for name, start, end, old, new in hunks:
        ws = start + offset
        we = ws + len(new.splitlines(keepends=True))
        offset += (we - ws) - (end - start)
        touching = [d for d in diffs if _overlaps(d, ws, we)]
        if not touching:
            found[name] = "kept"
        elif len(touching) == 1 and (touching[0].start, touching[0].end) == (ws, we) and touching[0].new_text == old:
            found[name] = "reverted"
        else:
            found[name] = "changed"
    return found


def _overlaps(d: LineHunk, ws: int, we: int) -> bool:
    if max(d.start, ws) < min(d.end, we):
        return True
    if d.start == d.end:
        return ws <= d.start <= we
    return ws == we and d.start <= ws <= d.end


async def read_back(port: AcpPort, written: Written) -> str | None:
    """The `<nagent-review-result source="client">` block saying what the client kept of the change it was given
    (None when it kept all of it)."""
    lines: list[str] = []
    status: dict[str, list[str]] = {"kept": [], "reverted": [], "changed": []}
    for path, _base, text, hunks in written.files:
        current = await port.fetch_buffer(path)
        if current is None:
            try:
                current = read_disk_text(path) if path.exists() else ""
            except OSError:
                continue
        if current == text:
            status["kept"] += [h[0] for h in hunks]
            continue
        for name, how in classify(text, current, hunks).items():
            status[how].append(name)
            if how != "kept":
                hunk = next(h for h in hunks if h[0] == name)
                lines += [
                    "",
                    f"{how.capitalize()} by the user in the editor: {name} in {path.name} (lines "
                    f"{hunk[1] + 1}-{max(hunk[2], hunk[1] + 1)}).",
                    "Proposed text:",
                    hunk[4].rstrip("\n") or "(delete the lines)",
                    "Instead of:",
                    hunk[3].rstrip("\n") or "(nothing: an insertion)",
                ]
    if not status["reverted"] and not status["changed"]:
        return None
    head = f"The user reviewed the applied change {written.proposal} in the editor."
    attrs = {"proposal": written.proposal, "source": "client", **{k: " ".join(v) for k, v in status.items()}}
    return render_block("nagent-review-result", "\n".join([head, *lines]), attrs)


async def record_read_back(port: AcpPort, pending: list[Written]) -> None:
    """Every applied change set of the session read back and recorded in its conversation (then forgotten)."""
    while pending:
        written = pending.pop(0)
        block = await read_back(port, written)
        if block is not None and written.conversation.is_file():
            ConversationFile.open(written.conversation, port).append(block)
