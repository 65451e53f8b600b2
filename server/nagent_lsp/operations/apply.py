"""Applying a change set as one change (DESIGN §9): through the port, with its patch, and a note in the conversation
of every other file it changed ("memory stays with each file").

`apply_change_set` is the one way an accepted change reaches the files, whether a run applies it at once or a
review accepts a proposal (`operations/deliver.py` decides which; `operations/review.py` resolves proposals). The
port plans it (`text.merge.plan_change_set`) and writes the patch — and whatever `also` names, e.g. the proposal's
record — with the files: the disk port in one transaction, so a crash never leaves files changed and a proposal
pending, nor a change without its patch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import ApplyOutcome, EditorPort, FileChange, FileOutcome, Records, RecordWrite
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationError
from nagent_lsp.store.patches import patch_file_name
from nagent_lsp.tags.transcript import render_block
from nagent_lsp.text.edits import unified_diff

log = logging.getLogger("nagent_lsp")

PATCHES = "patches"


@attrs.frozen
class FileResult:
    """One file of an applied change set, as a command's result names it."""

    uri: str
    edits: int
    created: bool


@attrs.frozen
class Applied:
    """What became of a change set sent as one change: the port's outcome and the patch written with it."""

    outcome: ApplyOutcome
    patch: Path | None = None

    @property
    def files(self) -> tuple[FileResult, ...]:
        return tuple(FileResult(f.uri, f.edits, f.created) for f in self.outcome.files)


def shown_path(state_root: Path, path: Path) -> str:
    """The path a diff names: relative to the workspace the state root belongs to, when it is inside it."""
    try:
        return str(path.relative_to(state_root.parent))
    except ValueError:
        return str(path)


def change_patch(state_root: Path, files: Iterable[tuple[Path, str, str, bool]]) -> str:
    """One unified diff for (path, old, new, created) of every file; a created file's starts `--- /dev/null`."""
    return "".join(
        unified_diff(old, new, shown_path(state_root, path), created=created) for path, old, new, created in files
    )


async def apply_change_set(
    session: Session,
    port: EditorPort,
    state_root: Path,
    changes: Sequence[FileChange],
    *,
    target: Path,
    request: str,
    conversation: str,
    also: Sequence[RecordWrite] = (),
) -> Applied:
    """Send the change set as one change, its patch (under `<state root>/patches/`) and `also` written with it;
    once applied, tell every other changed file's conversation what happened to it."""
    label = f"nagent: {request.strip().splitlines()[0][:60] if request.strip() else 'edit'}"
    written: list[Path] = []

    def records(files: Sequence[FileOutcome]) -> list[RecordWrite]:
        patch = change_patch(state_root, ((f.path, f.base_text, f.final_text, f.created) for f in files))
        if not patch:
            return list(also)
        written.append(state_root / PATCHES / patch_file_name(target))
        return [RecordWrite(written[0], patch), *also]

    outcome = await port.apply_changes(changes, label, Records(state_root, records))
    if not outcome.applied:
        return Applied(outcome)
    from nagent_lsp.operations.attribution import record_applied  # issue 27: the ledger of who wrote which lines

    await record_applied(session, state_root, outcome.files, target=target, request=request, conversation=conversation)
    await record_in_other_conversations(session, port, outcome.files, target, request, conversation, state_root)
    return Applied(outcome, written[0] if written else None)


async def record_in_other_conversations(
    session: Session,
    port: EditorPort,
    files: Iterable[FileOutcome],
    target: Path,
    request: str,
    conversation: str,
    state_root: Path,
) -> None:
    """DESIGN §9 "memory stays with each file": each changed file other than the target gets a block in its own
    conversation (created if needed) — which conversation changed it, the request and the file's diff. Paths are
    named relative to the workspace, so a conversation the repository shares reads right in any clone (issue 28)."""
    named = shown_path(state_root, target)
    for changed in files:
        if changed.path == target:
            continue
        diff = unified_diff(
            changed.base_text, changed.final_text, shown_path(state_root, changed.path), created=changed.created
        )
        body = (
            f"{'Created' if changed.created else 'Changed'} as part of a change to {named} made in the conversation "
            f"{conversation}, for the request:\n{request.strip()}\n\nThe diff of this file:\n{diff}"
        )
        attrs_ = {"by_conversation": conversation, "target": named, "created": str(changed.created).lower()}
        await append_to_conversation_of(session, port, changed.path, render_block("nagent-change-result", body, attrs_))


async def append_to_conversation_of(session: Session, port: EditorPort, path: Path, block: str) -> None:
    """Append `block` to `path`'s conversation under its run lock; when a run on that file holds the lock, the
    block is appended as soon as it ends (never waiting here: two runs could wait on each other)."""
    from nagent_lsp.operations.conversation import store_for

    try:
        store = store_for(session, path)
        ref = store.resolve(path)
    except (ConversationError, OSError, UserError) as exc:
        log.info("no conversation for %s: %s", path, exc)
        return
    lock = store.lock_for(ref)

    async def append() -> None:
        async with lock:
            ConversationFile.open(ref.conversation_path, port).append(block)

    if lock.locked():
        task = asyncio.get_running_loop().create_task(append())
        _background.add(task)
        task.add_done_callback(_background.discard)
    else:
        await append()


_background: set[asyncio.Task[None]] = set()
