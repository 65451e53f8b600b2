"""What a run may take as its target, and the line its result ends with (issue 25).

nagent's own files — everything under a state root: conversations, proposals, splits, patches, outputs, its
config, agents and recipes — are never the target of `nagent.edit`, an instruction or a recipe: editing a
conversation as a source file ran the model on the conversation itself ("the conversation of the
conversation"). The way to send a request from a conversation is `nagent.conversation.send`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

import attrs

from nagent_lsp.agent.mentions import summary
from nagent_lsp.config.state_root import STATE_DIR, home_root
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.operations.deliver import RunResult
from nagent_lsp.operations.run_message import run_message
from nagent_lsp.operations.session import Session

R = TypeVar("R", bound=RunResult)


def state_root_of_file(session: Session, path: Path) -> Path | None:
    """The state root `path` lies in, if any: its own (`<repo>/.nagent`, the workspace's, the stateRoot setting),
    `~/.nagent`, or any `.nagent` folder inside a workspace folder (a nested repository's)."""
    real = Path(os.path.realpath(path))
    roots = [session.state_root(real).path, home_root()]
    if session.settings.stateRoot:
        roots.append(Path(os.path.expanduser(session.settings.stateRoot)))
    for root in roots:
        resolved = Path(os.path.realpath(root))
        if real != resolved and real.is_relative_to(resolved):
            return resolved
    for folder in session.workspace_folders:
        folder = Path(os.path.realpath(folder))
        if real.is_relative_to(folder) and STATE_DIR in real.relative_to(folder).parts[:-1]:
            parts = real.relative_to(folder).parts
            return folder.joinpath(*parts[: parts.index(STATE_DIR) + 1])
    return None


def refuse_state_file(session: Session, path: Path, field: str = "uri") -> None:
    """InvalidArgument when `path` is one of nagent's own files (see the module docstring)."""
    root = state_root_of_file(session, path)
    if root is None:
        return
    raise InvalidArgument(
        field,
        f"{path} is in nagent's state root {root} (conversations, proposals, splits, its settings), which is never "
        "an edit target; run the request on the source file, or send it from its conversation with "
        "nagent.conversation.send (type it at the conversation's end)",
    )


def with_message(result: R, name: str) -> R:
    """`result` with its `message` (operations.run_message): what became of the change, the mentions, the tokens
    and the cost in USD."""
    proposal = result.proposal
    hunks = sum(len(f.hunks) for f in proposal.files) if proposal is not None else None
    files = len(proposal.files) if proposal is not None else len(result.files or [])
    mentions = getattr(result, "mentions", None) or []
    notes = [note for note in [summary(mentions)] if note]
    message = run_message(
        name,
        applied=result.applied,
        edits=result.edits,
        files=files,
        hunks=hunks,
        reason=result.reason,
        tokens=result.tokens,
        notes=notes,
    )
    return attrs.evolve(result, message=message)
