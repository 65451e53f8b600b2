"""Registering `workspace/executeCommand` handlers with one error policy.

Every command takes one JSON object, parsed here once into the command's typed arguments (config.args), so
operations only ever see typed values. Errors become JSON-RPC errors with the operation's message:
InvalidArgument (a bad field, named) → InvalidParams, UserError/ModelError → a request error, anything else →
an internal error that is logged; never a crash and never a silent null.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from nagent_lsp.config.args import parse_args
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.model import ModelError
from nagent_lsp.lsp.server import NagentServer

log = logging.getLogger("nagent_lsp")

# JSON-RPC "server error" range: a failure the user must act on, distinct from a bug.
USER_ERROR_CODE = -32001

A = TypeVar("A")
Result = dict[str, Any]


def register_command(
    server: NagentServer,
    name: str,
    args_type: type[A],
    handler: Callable[[NagentServer, A], Result | Awaitable[Result]],
) -> None:
    """`handler(server, args)` with the argument parsed into `args_type`; sync handlers run in a worker thread so
    git or disk work never stalls the loop."""

    @server.command(name)
    async def run(ls: NagentServer, *arguments: Any) -> Result:
        request_id = ls.protocol.msg_id
        if request_id is not None:
            ls.running[request_id] = asyncio.current_task()
        try:
            args = parse_args(args_type, list(arguments))
            if inspect.iscoroutinefunction(handler):
                return await handler(ls, args)
            return await asyncio.to_thread(handler, ls, args)  # type: ignore[arg-type]
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
            if request_id is not None:
                ls.running.pop(request_id, None)

    run.__name__ = f"command_{name.replace('.', '_')}"
