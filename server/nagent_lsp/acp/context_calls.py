"""What the model is given, as completed tool calls shown before the run: the root context and the team's rules
files (`read`), the file's history with its commits, cached summaries and co-edit rows (`search`), the target
file (`read`). Gathered with the engine's own functions (their caches make the run's second look free)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")
SHOWN = 8000  # characters of a block shown in its tool call
TIMEOUT = 10.0  # as the engine's own CONTEXT_TIMEOUT: context is a help, never a wait


def history_title(body: str) -> str:
    """ "history: 2 commits, 1 co-edit row" (what the {file-history} block holds)."""
    commits = rows = 0
    part = ""
    for line in body.splitlines():
        if line.startswith("History"):
            part = "history"
        elif line.startswith(("Summarized commits", "People")):
            part = ""
        elif line.startswith("Files changed in the same commits"):
            part = "coedits"
        elif line.startswith("- ") and part == "history":
            commits += 1
        elif line.startswith("| ") and part == "coedits" and not line.startswith(("| file", "| ---")):
            rows += 1
    return f"history: {commits} commit{'' if commits == 1 else 's'}, {rows} co-edit row{'' if rows == 1 else 's'}"


def gathered(session: Session, path: Path) -> list[tuple[str, str, str]]:
    """(kind, title, text) of what the run's initial context will hold: the context layers (root context, the
    team's rules files), the file's history block, the target file. Blocking: run in a thread."""
    from nagent_lsp.operations.context_info import context_layers
    from nagent_lsp.operations.history import file_history_block

    found: list[tuple[str, str, str]] = []
    try:
        for layer in context_layers(session, path).layers:
            if not layer.omitted:
                found.append(("read", f"{layer.label} ({layer.bytes:,} bytes)", layer.source))
    except Exception as exc:  # context is a help: a failure here only shows less
        log.info("no context layers for %s: %s", path, exc)
    try:
        history = file_history_block(session, path)
    except Exception as exc:
        log.info("no history block for %s: %s", path, exc)
        history = ""
    if history:
        found.append(("search", history_title(history), history))
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").count("\n")
        found.append(("read", f"read {path.name} ({lines:,} lines)", str(path)))
    except OSError:
        pass
    return found


async def context_calls(session: Session, path: Path, prefix: str) -> list[Any]:
    """The completed tool calls of what the model is given (bounded in time: [] when it takes too long)."""
    from acp.schema import ContentToolCallContent, TextContentBlock, ToolCallLocation, ToolCallStart

    try:
        found = await asyncio.wait_for(asyncio.to_thread(gathered, session, path), TIMEOUT)
    except TimeoutError:
        return []
    calls = []
    for number, (kind, title, text) in enumerate(found):
        shown = text if len(text) <= SHOWN else text[:SHOWN] + f"\n[… {len(text) - SHOWN} more characters]"
        is_path = text.startswith("/") and "\n" not in text
        content = [ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=shown))]
        calls.append(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=f"{prefix}-context-{number}",
                title=title[:200],
                kind=kind,  # type: ignore[arg-type]
                status="completed",
                content=None if is_path else content,  # type: ignore[arg-type]
                locations=[ToolCallLocation(path=text)] if is_path else None,
            )
        )
    return calls
