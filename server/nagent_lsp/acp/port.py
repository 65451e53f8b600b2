"""EditorPort over ACP: one per ACP session (every message to the client names its session).

- Buffers: the texts the client gave (an embedded resource in the prompt) or read for us (`fs/read_text_file`,
  only when it advertised it) before a run; the engine reads them synchronously, so they are fetched ahead.
- `apply_changes`: through `fs/write_text_file` when the client advertised it (Zed then reviews the edit per hunk
  and merges it with the user's typing), the proposal's records written by us in one transaction afterwards; else
  the engine's transactional disk apply (`operations.disk_apply`). Nothing is ever written through fs/* when the
  client did not offer it.
- `ask`: `session/request_permission`; progress messages become completed tool calls; the answer streams as
  `agent_message_chunk`s (`answer_delta`).

Notifications are queued and sent in order by one task, so the synchronous port methods (progress, deltas) never
block the engine and the client sees them in the order they happened; `flush` waits until they are out.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nagent_lsp.core.ports import (
    ApplyOutcome,
    Buffer,
    FileChange,
    FileOutcome,
    Progress,
    Records,
    ReviewMark,
    apply_as_change_set,
)
from nagent_lsp.operations.disk_apply import apply_on_disk, on_disk, outcomes, write_records
from nagent_lsp.text.merge import Current, plan_change_set

if TYPE_CHECKING:
    from acp.interfaces import Client

    from nagent_lsp.agent.mcp_tools import McpServer

log = logging.getLogger("nagent_lsp")
_LIVE = re.compile(r"turn \d+ · ")

ASK_TIMEOUT = 600.0  # a user may read a long diff before answering
READ_TIMEOUT = 30.0

# engine choice titles (agent/permissions.py) → ACP permission option kinds
_KINDS = {"Run once": "allow_once", "Allow": "allow_once", "Always": "allow_always", "Deny": "reject_once"}


def tool_kind(message: str) -> str:
    """The ACP tool kind a progress message describes ("reading diff.c" → read, "running pytest" → execute)."""
    word = message.split(" ", 1)[0].lower()
    if word in ("reading", "read"):
        return "read"
    if word in ("running", "run"):
        return "execute"
    if word in ("searching", "history", "co-edits", "coedits", "looking"):
        return "search"
    if word in ("writing", "applying", "editing"):
        return "edit"
    if word in ("thinking", "turn", "asking"):
        return "think"
    return "other"


class AcpPort:
    def __init__(self, client: Client, session_id: str, folders: list[Path], fs_read: bool, fs_write: bool):
        self.client = client
        self.session_id = session_id
        self.folders = folders
        self.fs_read = fs_read
        self.fs_write = fs_write
        self.buffers: dict[Path, Buffer] = {}
        self.progresses: list[Progress] = []
        self.cancel_requested = False  # session/cancel during this prompt: a run that starts now starts cancelled
        self.streamed = False  # whether the current prompt's answer went out as deltas
        self._turn = -1
        self.written: list[Path] = []  # files written through fs/write_text_file
        self.last_applied: tuple[FileOutcome, ...] = ()  # what the last applied change set wrote (for the read-back)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._counter = 0
        self.closed = False
        # Called after each top-level model call of a run (its `done` delta): the agent sends a usage_update.
        self.on_model_call: Callable[[], None] | None = None

    # -- sending -----------------------------------------------------------------------------------------
    def send(self, update: Any) -> None:
        """Queue one `session/update` (sent in order by the sender task); dropped once the session is closed."""
        if self.closed:
            return
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_all())
        self._queue.put_nowait(update)

    async def _send_all(self) -> None:
        while True:
            update = await self._queue.get()
            try:
                await self.client.session_update(session_id=self.session_id, update=update)
            except Exception as exc:  # a client that went away: the run goes on, its updates are lost
                log.info("session/update not delivered: %s", exc)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Every queued update sent (before a prompt's answer, so the client has them all)."""
        if self._sender is not None and not self._sender.done():
            await self._queue.join()

    def close(self) -> None:
        """The session is closed (or loaded again): stop sending, and release whoever waits in `flush`."""
        self.closed = True
        self.cancel_all()
        if self._sender is not None:
            self._sender.cancel()
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()

    def next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    @property
    def mcp_servers(self) -> tuple[McpServer, ...]:
        """The MCP servers the client gave this session: a run's `<nagent-tool>` tools (agent.mcp_tools.servers_for)."""
        from nagent_lsp.acp.mcp_servers import mcp_servers_for

        return mcp_servers_for(self.session_id)

    # -- EditorPort --------------------------------------------------------------------------------------
    def workspace_folders(self) -> list[Path]:
        return list(self.folders)

    def read_buffer(self, path: Path) -> Buffer | None:
        return self.buffers.get(path)

    async def fetch_buffer(self, path: Path) -> str | None:
        """The client's text of `path` (its unsaved buffer) through `fs/read_text_file`, kept as the buffer the
        engine reads; None when the client did not offer it or could not read it."""
        if not self.fs_read:
            return None
        try:
            response = await asyncio.wait_for(
                self.client.read_text_file(session_id=self.session_id, path=str(path)), READ_TIMEOUT
            )
        except Exception as exc:  # a missing file, a client error: the engine reads the disk instead
            log.info("fs/read_text_file %s: %s", path, exc)
            return None
        text = response.content
        self.buffers[path] = Buffer(path=path, text=text, version=None, uri=path.as_uri())
        return text

    async def apply_change(self, change: FileChange) -> ApplyOutcome:
        return await apply_as_change_set(self, change)

    async def apply_changes(
        self, changes: Sequence[FileChange], label: str, records: Records | None = None
    ) -> ApplyOutcome:
        if not self.fs_write:
            outcome = await apply_on_disk(self.folders, changes, records)
            self.buffers.clear()  # the disk is what the next run reads
            self.last_applied = outcome.files if outcome.applied else ()
            return outcome
        for change in changes:  # the client's own text first: it merges the user's unsaved typing
            if change.path not in self.buffers and change.path.exists():
                await self.fetch_buffer(change.path)
        plan = plan_change_set(changes, self._current)
        if plan.conflict is not None:
            return ApplyOutcome(False, 0, plan.reason, plan.conflict_text, conflict=plan.conflict)
        if not plan.files:
            return ApplyOutcome(False, 0, plan.reason or "no change")
        files = outcomes(plan)
        for file in files:
            # The client creates a missing file (ACP: fs/write_text_file); an error here stops the rest.
            try:
                await self.client.write_text_file(
                    session_id=self.session_id, path=str(file.path), content=file.final_text
                )
            except Exception as exc:
                done = self.written[-len(files) :]
                return ApplyOutcome(False, 0, f"the editor did not write {file.path}: {exc}; written: {len(done)}")
            self.written.append(file.path)
            self.buffers[file.path] = Buffer(file.path, file.final_text, None, file.path.as_uri())
        await write_records(self.folders, files, records, with_files=False)
        self.last_applied = files
        return ApplyOutcome(True, sum(f.edits for f in files), None, files[0].final_text, files)

    def _current(self, change: FileChange) -> Current:
        buffer = self.buffers.get(change.path)
        if buffer is not None:
            return Current(buffer.text, None, change.uri)
        return on_disk(change)

    def publish_review(self, uri: str, marks: Sequence[ReviewMark]) -> None:
        return None  # ACP clients review a change set from its edit tool calls

    async def ask(self, message: str, choices: list[str]) -> str | None:
        """`session/request_permission` with one option per choice; None when the client answered cancelled, the
        prompt was cancelled meanwhile, or no answer came."""
        from acp.schema import PermissionOption, ToolCallUpdate

        options = [
            PermissionOption(option_id=f"o{i}", name=choice, kind=_KINDS.get(choice, "allow_once"))  # type: ignore[arg-type]
            for i, choice in enumerate(choices)
        ]
        kind = "execute" if "shell command" in message else "other"
        title = message.split("\n", 1)[0].rstrip(":")
        call = ToolCallUpdate(tool_call_id=self.next_id("ask"), title=title, kind=kind, status="pending")  # type: ignore[arg-type]
        call.raw_input = {"message": message}
        chosen = await self.request_permission(call, options)
        if chosen is None:
            return None
        return choices[int(chosen[1:])]

    async def request_permission(self, call: Any, options: list[Any]) -> str | None:
        """The option id the user chose, or None (cancelled by the client or by session/cancel, or no answer)."""
        await self.flush()
        request = asyncio.ensure_future(
            self.client.request_permission(session_id=self.session_id, tool_call=call, options=options)
        )
        cancelled = [asyncio.ensure_future(p.cancel.wait()) for p in self.progresses]
        try:
            done, _ = await asyncio.wait([request, *cancelled], timeout=ASK_TIMEOUT, return_when="FIRST_COMPLETED")
        finally:
            for waiter in cancelled:
                waiter.cancel()
        if request not in done:
            request.cancel()
            return None
        try:
            outcome = request.result().outcome
        except Exception as exc:
            log.info("session/request_permission failed: %s", exc)
            return None
        return getattr(outcome, "option_id", None) if getattr(outcome, "outcome", "") == "selected" else None

    async def show_document(self, path: Path) -> bool:
        return False

    async def begin_progress(self, title: str, cancellable: bool = True) -> Progress:
        progress = Progress(title, token=self.next_id("progress"))
        if self.cancel_requested:
            progress.cancel.set()
        self.progresses.append(progress)
        return progress

    def report_progress(self, progress: Progress, message: str, percentage: int | None = None) -> None:
        """A step of the run as a completed tool call (what the model was given, what ran)."""
        from acp.schema import ToolCallStart

        if _LIVE.match(message):
            return  # "turn 2 · 1,234 tokens · writing calc.py": live figures, not a step (usage_update has them)
        self.send(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=self.next_id("step"),
                title=message,
                kind=tool_kind(message),  # type: ignore[arg-type]
                status="completed",
            )
        )

    def end_progress(self, progress: Progress, message: str = "") -> None:
        progress.ended = True

    def answer_delta(self, progress: Progress | None, uri: str, delta: str, turn: int, done: bool = False) -> None:
        """Contract A: the answer as it arrives, as agent message chunks."""
        from acp import update_agent_message_text

        if done and self.on_model_call is not None:
            # Soon, not now: the engine adds the call's usage and appends its turn status right after this `done`,
            # in the same step of the event loop (agent.loop), so the callback sees this call counted.
            asyncio.get_running_loop().call_soon(self.on_model_call)
        if not delta:
            return
        if self.streamed and turn != self._turn:
            delta = "\n\n" + delta  # another reply of the run (a retry, a correction): a new paragraph
        self.streamed, self._turn = True, turn
        self.send(update_agent_message_text(delta))

    def cancel_all(self) -> None:
        self.cancel_requested = True
        for progress in self.progresses:
            progress.cancel.set()

    def forget_progress(self) -> None:
        self.progresses = [p for p in self.progresses if not p.ended]

    def log(self, level: str, message: str) -> None:
        getattr(log, level if level in ("debug", "info", "warning", "error") else "info")(message)


def new_session_id() -> str:
    return f"new-{uuid.uuid4().hex[:12]}"
