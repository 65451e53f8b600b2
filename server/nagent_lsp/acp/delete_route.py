"""`session/delete` for SDK 0.12.1, which routes no such request: its `AgentSideConnection` builds its router inside
its constructor, and the extension hook only sees `_`-prefixed methods. The route is added to that router after the
connection is built, found through the connection's private attributes — checked, so an SDK that moves them leaves
delete unadvertised (and the request answered "method not found") rather than half-working; a newer SDK that routes
it itself is used as it is. `initialize` advertises `sessionCapabilities.delete` only when the route exists.
"""

from __future__ import annotations

from typing import Any

METHOD = "session/delete"


def add_delete_route(conn: Any, agent: Any) -> bool:
    """Route `session/delete` to `agent.delete_session`; whether the connection now routes it."""
    from acp.router import MessageRouter
    from acp.schema import DeleteSessionRequest
    from acp.utils import normalize_result

    router = getattr(getattr(conn, "_conn", None), "_handler", None)
    requests = getattr(router, "_requests", None)
    if not isinstance(router, MessageRouter) or not isinstance(requests, dict):
        return False
    if METHOD not in requests:
        router.route_request(METHOD, DeleteSessionRequest, agent, "delete_session", adapt_result=normalize_result)
    return requests.get(METHOD) is not None and getattr(requests[METHOD], "func", None) is not None
