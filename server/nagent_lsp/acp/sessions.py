"""ACP sessions are nagent's per-file conversations (DESIGN §4): the session id of a conversation is its file's
identity (`fileId`, device:inode — it survives a rename and a save-by-replace, as in LSP), so `session/list`,
`session/load` and the LSP's `nagent.conversation.*` all name the same conversation file.

A `session/new` has no file yet: it gets a provisional id and binds, at its first prompt, to the file the prompt
names — or, when it names none, to the workspace folder's main conversation (operations.main_conversation, session id
`main:<folder's dev:ino>`, titled "workspace — …"); the provisional id stays an alias of that conversation for this
process.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import attrs

from nagent_lsp.acp.mcp_servers import McpServer
from nagent_lsp.acp.port import AcpPort
from nagent_lsp.operations.conversation import store_for
from nagent_lsp.operations.main_conversation import is_main, main_ref
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationRef
from nagent_lsp.tags.transcript import USER_PROMPT, last_turn_status, parse_blocks

PAGE = 50  # sessions per session/list page


@attrs.define
class Written:
    """A change set this session applied: per file what was written, to read back at the next prompt."""

    proposal: str
    conversation: Path
    files: list[tuple[Path, str, str, list[tuple[str, int, int, str, str]]]]  # path, base, written, hunks


@attrs.define
class AcpSession:
    """One ACP session: its port, the conversation it is bound to (None until the first prompt of a new one), the
    client's MCP servers, the mode (agent) and model profile chosen, and the session's cumulative cost."""

    id: str
    cwd: Path
    port: AcpPort
    mcp_servers: list[McpServer] = attrs.Factory(list)
    ref: ConversationRef | None = None
    agent: str | None = None
    profile: str | None = None
    cost: float = 0.0
    priced: bool = False
    pending_reads: list[Written] = attrs.Factory(list)  # applied change sets to read back at the next prompt
    running: bool = False


def session_id_of(ref: ConversationRef) -> str:
    return ref.file_id


def conversation_refs(session: Session, cwd: Path | None = None) -> list[ConversationRef]:
    """Every conversation of the workspace's state roots (filtered to files under `cwd`), newest first."""
    seen: dict[str, ConversationRef] = {}
    for folder in session.workspace_folders:
        store = store_for(session, folder, create=False)
        if not store.directory.is_dir():
            continue
        for ref in store.refs():
            if ref.untitled or not _has_turns(ref.conversation_path):
                continue  # no file yet, or an empty one (nothing run yet, or archived by session/delete)
            if cwd is not None and not _under(Path(ref.path), cwd):
                continue
            seen.setdefault(ref.file_id, ref)
        main = main_ref(session, folder, create=False)  # the folder's main conversation, once it has a turn
        if _has_turns(main.conversation_path) and (cwd is None or _under(folder, cwd) or _under(cwd, folder)):
            seen.setdefault(main.file_id, main)
    return sorted(seen.values(), key=_mtime, reverse=True)


def _has_turns(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def find_ref(session: Session, session_id: str) -> ConversationRef | None:
    return next((r for r in conversation_refs(session) if session_id_of(r) == session_id), None)


def _under(path: Path, folder: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
    except OSError:
        return False


def _mtime(ref: ConversationRef) -> float:
    try:
        return ref.conversation_path.stat().st_mtime
    except OSError:
        return 0.0


def title_of(ref: ConversationRef, folder: Path, text: str) -> str:
    """ "calc.py — make add handle floats": the file's relative path and the last request's first line."""
    try:
        shown = "workspace" if is_main(ref) else Path(ref.path).relative_to(folder).as_posix()
    except ValueError:
        shown = Path(ref.path).name
    last = next((b for b in reversed(parse_blocks(text)) if b.kind == USER_PROMPT), None)
    line = (last.body or "").strip().split("\n", 1)[0][:80] if last is not None else ""
    return f"{shown} — {line}" if line else shown


def session_info(session: Session, ref: ConversationRef, cwd: Path, pending: int) -> dict[str, object]:
    """The fields of one `SessionInfo` (the caller builds the SDK model)."""
    try:
        text = ref.conversation_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    status = last_turn_status(text)
    tokens = (status.tokens_in_total + status.tokens_out_total) if status else 0
    updated = datetime.fromtimestamp(_mtime(ref), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "session_id": session_id_of(ref),
        "cwd": str(cwd),
        "title": title_of(ref, cwd, text),
        "updated_at": updated,
        "field_meta": {
            "nagent": {
                "fileId": ref.file_id,
                "path": ref.path,
                "conversation": str(ref.conversation_path),
                "pendingProposals": pending,
                "tokens": tokens,
            }
        },
    }


def pending_by_conversation(session: Session) -> dict[str, int]:
    """How many pending proposals each conversation file has."""
    from nagent_lsp.operations.review import pending_proposals

    counts: dict[str, int] = {}
    for _root, proposal in pending_proposals(session):
        key = Path(proposal.conversation.path).name
        counts[key] = counts.get(key, 0) + 1
    return counts
