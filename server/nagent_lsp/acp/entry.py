"""The agent `run_agent` serves: `initialize` is answered at once (`acp.capabilities`), the engine
(`acp.agent.NagentAgent`: settings, stores, operations) is imported at the first request that needs it, so an
editor that starts the agent to list it sees it answer as fast as a bare SDK agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nagent_lsp.acp.capabilities import client_fs, initialize_response


class LazyAgent:
    def __init__(self) -> None:
        self._client: Any = None
        self._fs = (False, False)
        self._agent: Any = None
        self.delete_routed = False  # session/delete is routed (acp.delete_route): then initialize advertises it

    def on_connect(self, conn: Any) -> None:
        self._client = conn
        if self._agent is not None:
            self._agent.on_connect(conn)

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> Any:
        self._fs = client_fs(client_capabilities)
        if self._agent is not None:
            self._agent.fs_read, self._agent.fs_write = self._fs
        return initialize_response(delete=self.delete_routed)

    def _real(self) -> Any:
        if self._agent is None:
            from nagent_lsp.acp.agent import NagentAgent

            self._agent = NagentAgent()
            self._agent.on_connect(self._client)
            self._agent.fs_read, self._agent.fs_write = self._fs
        return self._agent


def _forward(name: str) -> Callable[..., Awaitable[Any]]:
    async def method(self: LazyAgent, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self._real(), name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "authenticate",
    "new_session",
    "load_session",
    "resume_session",
    "close_session",
    "delete_session",
    "list_sessions",
    "set_config_option",
    "set_session_mode",
    "prompt",
    "cancel",
    "ext_method",
    "ext_notification",
):
    setattr(LazyAgent, _name, _forward(_name))
