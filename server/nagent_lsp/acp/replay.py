"""`session/load`: a conversation file replayed as `session/update`s — requests as user message chunks, answers as
agent message chunks, the engine's result blocks as completed tool calls. The file is read now, so whatever the
user wrote in it by hand is what the client shows."""

from __future__ import annotations

import re
from typing import Any

from nagent_lsp.tags.transcript import (
    AGENT_RESPONSE,
    INITIAL_CONTEXT,
    INTERRUPTED_KIND,
    NEXT_INPUT,
    SYSTEM,
    TEXT,
    TURN_STATUS,
    USER_PROMPT,
    Block,
    parse_blocks,
)

_RESPONSE = re.compile(r"<nagent-response>\n?(.*?)\n?</nagent-response>", re.S)
_KINDS = {
    "nagent-read-result": "read",
    "nagent-search-result": "search",
    "nagent-shell-result": "execute",
    "nagent-edit-result": "edit",
    "nagent-change-result": "edit",
    "nagent-write-result": "edit",
    "nagent-replace-result": "edit",
    "nagent-review-result": "edit",
}


def answer_text(reply: str) -> str:
    """What a reply says to the user: its <nagent-response> parts, else the whole reply."""
    parts = _RESPONSE.findall(reply)
    return "\n\n".join(p.strip("\n") for p in parts) if parts else reply


def replay_updates(text: str) -> list[Any]:
    """The updates that show conversation `text`, in order."""
    from acp import update_agent_message_text, update_user_message_text
    from acp.schema import ContentToolCallContent, TextContentBlock, ToolCallStart

    updates: list[Any] = []
    for number, block in enumerate(parse_blocks(text)):
        body = (block.body or "").strip("\n")
        if block.kind in (INITIAL_CONTEXT, TURN_STATUS):
            continue
        if block.kind in (USER_PROMPT, NEXT_INPUT, TEXT):
            shown = body if block.kind != TEXT else block.raw.strip("\n")
            if shown:
                updates.append(update_user_message_text(shown))
        elif block.kind == AGENT_RESPONSE:
            updates.append(update_agent_message_text(answer_text(body)))
        elif block.kind == INTERRUPTED_KIND:
            updates.append(update_agent_message_text(block.raw.strip()))
        elif block.kind.startswith("nagent-") or block.kind == SYSTEM:
            content: list[Any] = [
                ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=body))
            ]
            updates.append(
                ToolCallStart(
                    session_update="tool_call",
                    tool_call_id=f"replay-{number}",
                    title=_title(block),
                    kind=_KINDS.get(block.kind, "other"),  # type: ignore[arg-type]
                    status="completed",
                    content=content if body else None,
                    raw_input=dict(block.attrs) or None,
                )
            )
    return updates


def _title(block: Block) -> str:
    path = block.attr("path") or block.attr("file")
    name = block.kind.removeprefix("nagent-").removesuffix("-result")
    return f"{name} {path}" if path else name
