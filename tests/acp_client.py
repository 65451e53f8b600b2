"""The ACP SDK's own client driving `python -m nagent_lsp acp` (tests/test_acp*.py): it records every
`session/update`, answers permission requests from a script, and serves `fs/*` from a dict of buffers (the editor's
unsaved texts) over the disk, recording every call."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from tests.harness.lsp import server_env


@dataclass
class RecordingClient:
    """`answers`: option ids to choose, in order (None: answer cancelled); when empty, the first allow option.
    `hold`: when set, permission requests wait for it (a test cancels meanwhile)."""

    answers: list[str | None] = field(default_factory=list)
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    fs_calls: list[tuple[str, str]] = field(default_factory=list)
    buffers: dict[str, str] = field(default_factory=dict)
    hold: asyncio.Event | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.permissions.append((tool_call, options))
        self.asked.set()
        if self.hold is not None:
            await self.hold.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        answer = self.answers.pop(0) if self.answers else next(o.option_id for o in options if "allow" in o.kind)
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self.fs_calls.append(("read", path))
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.fs_calls.append(("write", path))
        self.buffers[path] = content  # an editor writes its buffer; it saves when the user says so
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        return None

    # -- what the tests look at ----------------------------------------------------------------------------
    def of_kind(self, kind: str) -> list[Any]:
        return [u for _s, u in self.updates if getattr(u, "session_update", None) == kind]

    def message_text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(getattr(u.content, "text", "") for u in self.of_kind(kind))

    def tool_calls(self, kind: str | None = None) -> list[Any]:
        return [u for u in self.of_kind("tool_call") if kind is None or u.kind == kind]


@contextlib.asynccontextmanager
async def acp_agent(
    workspace: Path,
    home: Path,
    env: dict[str, str] | None = None,
    *,
    fs: bool = True,
    client: RecordingClient | None = None,
) -> AsyncIterator[tuple[Any, RecordingClient, Any]]:
    """The agent process, initialized (with fs/* advertised when `fs`); yields (connection, client, initialize's
    answer)."""
    client = client or RecordingClient()
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "nagent_lsp",
        "acp",
        env=server_env(home, env),
        cwd=str(workspace),
    ) as (conn, _process):
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs))
        answer = await asyncio.wait_for(
            conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps), 60
        )
        yield conn, client, answer


async def wait_for(condition: Callable[[], Any], timeout: float = 60.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True
