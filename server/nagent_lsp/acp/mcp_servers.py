"""The MCP servers an ACP client hands a session (`session/new|load|resume` `mcpServers`), typed and checked.

ACP requires every agent to accept stdio servers; HTTP/SSE ones are kept too (with their kind) so the engine can
say it does not connect them. The engine reads a session's servers through `mcp_servers_for(session_id)` — the one
seam for the MCP tools (`<nagent-tool>`), whoever wires them.
"""

from __future__ import annotations

from collections.abc import Sequence

from nagent_lsp.agent.mcp_tools import McpServer
from nagent_lsp.core.errors import InvalidArgument

__all__ = ["McpServer", "forget", "from_acp", "mcp_servers_for", "register"]


_REGISTRY: dict[str, tuple[McpServer, ...]] = {}


def mcp_servers_for(session_id: str) -> tuple[McpServer, ...]:
    """The MCP servers the client gave the ACP session `session_id` (() for none, or an unknown session)."""
    return _REGISTRY.get(session_id, ())


def register(session_id: str, servers: Sequence[McpServer]) -> None:
    if servers:
        _REGISTRY[session_id] = tuple(servers)
    else:
        _REGISTRY.pop(session_id, None)


def forget(session_id: str) -> None:
    _REGISTRY.pop(session_id, None)


def from_acp(servers: Sequence[object] | None) -> list[McpServer]:
    """The SDK's validated server models as `McpServer`s; a duplicate or blank name is an error naming it."""
    found: list[McpServer] = []
    for index, server in enumerate(servers or ()):
        name = str(getattr(server, "name", "") or "").strip()
        field = f"mcpServers[{index}]"
        if not name or "/" in name:
            raise InvalidArgument(f"{field}.name", "must be a non-empty name without '/'")
        if any(s.name == name for s in found):
            raise InvalidArgument(f"{field}.name", f"duplicate MCP server name {name!r}")
        pairs = tuple((str(v.name), str(v.value)) for v in getattr(server, "env", None) or ())
        headers = tuple((str(h.name), str(h.value)) for h in getattr(server, "headers", None) or ())
        kind = getattr(server, "type", None)
        if kind in ("http", "sse"):
            found.append(McpServer(name, kind, url=str(getattr(server, "url", "")), headers=headers))
            continue
        command = str(getattr(server, "command", "") or "")
        if not command:
            raise InvalidArgument(f"{field}.command", "a stdio MCP server needs a command")
        args = tuple(str(a) for a in getattr(server, "args", None) or ())
        found.append(McpServer(name, "stdio", command=command, args=args, env=pairs))
    return found
