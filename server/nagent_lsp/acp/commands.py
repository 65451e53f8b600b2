"""Slash commands (`available_commands_update`): each runs the operation its LSP command runs, on the session's
file, and answers as agent message text. `/agent NAME` switches the session's mode; `/recipe NAME [request]` runs a
recipe like a prompt (its change set reviewed the same way)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Protocol

from nagent_lsp.acp.sessions import AcpSession
from nagent_lsp.config.convert import to_wire
from nagent_lsp.core.errors import UserError
from nagent_lsp.operations.args import (
    CoeditsArgs,
    CompactArgs,
    HistoryArgs,
    NoArgs,
    PatchArgs,
    ReviewApplyArgs,
    ReviewDiscardArgs,
    SplitArgs,
    UriArgs,
)
from nagent_lsp.operations.main_conversation import is_main
from nagent_lsp.operations.session import Session


class Runner(Protocol):
    """What a command needs of the agent: a prompt's run (a recipe runs like one)."""

    async def run_edit(self, workspace: Session, state: AcpSession, request: str, recipe: str | None = None) -> str: ...


# name → (description, input hint or "")
COMMANDS: dict[str, tuple[str, str]] = {
    "history": ("The file's git history: authors, recent changes, co-edited files", ""),
    "coedits": ("Files that historically change together with this file", ""),
    "summarize": ("Summarise this file's conversation", ""),
    "compact": ("Fold the conversation's old turns into a summary", "instruction"),
    "split": ("Split this (large) file into segments", ""),
    "patch": ("Merge a split's segments back into its file", "path to the split's index.json"),
    "review": ("List the proposals awaiting review", ""),
    "accept": ("Apply a proposal (or some hunks of it)", "ID [h1,h2]"),
    "reject": ("Reject a proposal (or some hunks of it)", "ID [h1,h2]"),
    "recipe": ("Run a recipe on this file", "NAME [request]"),
    "agent": ("Switch the session's agent (edit, plan, explain, yours)", "NAME"),
}


def _json(value: object) -> str:
    return "```json\n" + json.dumps(to_wire(value), indent=2, ensure_ascii=False) + "\n```"


def _hunks(words: list[str]) -> list[str] | None:
    return [h for w in words for h in w.split(",") if h] or None


async def run_command(agent: Runner, session: Session, state: AcpSession, text: str) -> str:
    """Run `/name args`; the stop reason."""
    from acp import update_agent_message_text

    name, _, rest = text[1:].partition(" ")
    rest = rest.strip()
    if name not in COMMANDS:
        raise UserError(f"unknown command /{name}; the commands are " + ", ".join(f"/{c}" for c in COMMANDS))
    if name == "recipe":
        recipe, _, request = rest.partition(" ")
        if not recipe:
            raise UserError("/recipe needs a recipe name: /recipe NAME [request]")
        return await agent.run_edit(session, state, request.strip(), recipe=recipe)
    answer = await _answer(session, state, name, rest)
    state.port.send(update_agent_message_text(answer))
    return "end_turn"


FILE_COMMANDS = ("history", "coedits", "summarize", "compact", "split")  # about the session's own file


async def _answer(session: Session, state: AcpSession, name: str, rest: str) -> str:
    from nagent_lsp.operations import history, review

    assert state.ref is not None
    path = Path(state.ref.path)
    uri = path.as_uri()
    port = state.port
    words = rest.split()
    if is_main(state.ref) and name in FILE_COMMANDS:  # the main conversation has no file of its own
        raise UserError(f"/{name} works on a file: attach one in a file's session (this is the workspace's)")
    if name == "history":
        result = await asyncio.to_thread(history.history_result, session, HistoryArgs(uri=uri))
        return history.render_history_text(result)
    if name == "coedits":
        rows = await asyncio.to_thread(history.coedits_result, session, CoeditsArgs(uri=uri))
        return history.render_coedits_text(rows)
    if name == "agent":
        if not words:
            raise UserError("/agent needs an agent name: /agent NAME")
        state.agent = None if words[0] == "edit" else words[0]
        return f"agent: {words[0]}"
    if name == "review":
        return _json(review.review_list(session, port, NoArgs()))
    if name in ("accept", "reject"):
        if not words:
            raise UserError(f"/{name} needs a proposal id: /{name} ID [h1,h2]")
        if name == "accept":
            return _json(
                await review.review_apply(session, port, ReviewApplyArgs(id=words[0], accept=_hunks(words[1:])))
            )
        return _json(
            await review.review_discard(session, port, ReviewDiscardArgs(id=words[0], hunks=_hunks(words[1:])))
        )
    return await _more(session, state, name, rest, uri)


async def _more(session: Session, state: AcpSession, name: str, rest: str, uri: str) -> str:
    from nagent_lsp.operations import conversation_summary, patch, split

    port = state.port
    result: Any
    if name == "summarize":
        result = await conversation_summary.summarize_conversation(session, port, UriArgs(uri=uri))
        return str(result.summary)
    if name == "compact":
        result = await conversation_summary.compact_conversation(
            session, port, CompactArgs(uri=uri, instruction=rest or None)
        )
    elif name == "split":
        result = await split.split_async(session, port, SplitArgs(uri=uri))
    else:  # patch
        if not rest:
            raise UserError("/patch needs the split's index.json: /patch PATH")
        result = await patch.patch(session, port, PatchArgs(indexPath=rest))
    return _json(result)
