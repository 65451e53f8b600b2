"""Registering `workspace/executeCommand` handlers with one error policy.

Every command takes one JSON object; workflow errors become JSON-RPC errors with the workflow's message:
InvalidArgument → InvalidParams, UserError/ModelError → a request error, anything else → an internal error
that is logged, never a crash and never a silent null.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from nagent_lsp.core.model import ModelError
from nagent_lsp.core.errors import InvalidArgument, UserError

log = logging.getLogger("nagent_lsp")

# JSON-RPC "server error" range: a failure the user must act on, distinct from a bug.
USER_ERROR_CODE = -32001

Handler = Callable[[Any, Any], Any | Awaitable[Any]]


def register_command(server: Any, name: str, handler: Handler) -> None:
    """`handler(server, raw_argument)`; sync handlers run in a worker thread so git or disk work never stalls the loop."""

    @server.command(name)
    async def run(ls: Any, *arguments: Any) -> Any:
        raw = list(arguments)
        request_id = ls.protocol.current_request_id()
        if request_id is not None:
            ls.running[request_id] = asyncio.current_task()
        try:
            if inspect.iscoroutinefunction(handler):
                return await handler(ls, raw)
            return await asyncio.to_thread(handler, ls, raw)
        except (asyncio.CancelledError, JsonRpcException):
            # First: a cancelled model call is both a ModelError and a CancelledError, and it is not a failure.
            raise
        except InvalidArgument as exc:
            raise JsonRpcInvalidParams(exc.message) from exc
        except (UserError, ModelError) as exc:
            log.warning("%s failed: %s", name, exc)
            raise JsonRpcException(str(exc), code=USER_ERROR_CODE) from exc
        except Exception as exc:
            log.exception("%s crashed", name)
            raise JsonRpcInternalError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            ls.running.pop(request_id, None)

    run.__name__ = f"command_{name.replace('.', '_')}"
