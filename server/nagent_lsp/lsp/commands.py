"""Registering `workspace/executeCommand` handlers with one error policy.

Every command takes one JSON object, parsed here once into the command's typed arguments (config.args), so
operations only ever see typed values; a path argument (`uri`, `indexPath`) that no file system could take (a NUL,
a lone surrogate, thousands of characters) is refused here, naming the field. Errors become JSON-RPC errors with a
message a person can act on: InvalidArgument (a bad field, named) → InvalidParams, UserError/ModelError → a
request error with the operation's message, an OSError → a request error saying what the system refused and
for which file, anything else → an internal error pointing at the log. Never Python exception text in the
answer (the traceback goes to the log at -v), never a crash and never a silent null.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from nagent_lsp.config.args import parse_args
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.logs import cap, one_line
from nagent_lsp.core.model import ModelError
from nagent_lsp.lsp.rpc import shown
from nagent_lsp.lsp.server import NagentServer, internal_error_message

log = logging.getLogger("nagent_lsp")

# JSON-RPC "server error" range: a failure the user must act on, distinct from a bug.
USER_ERROR_CODE = -32001
PATH_FIELDS = ("uri", "indexPath")  # arguments that name a file
MAX_PATH_ARGUMENT = 8192  # characters: far beyond PATH_MAX (4096) even percent-encoded

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
            check_path_arguments(args)
            if inspect.iscoroutinefunction(handler):
                return await handler(ls, args)
            return await asyncio.to_thread(handler, ls, args)  # type: ignore[arg-type]
        except (asyncio.CancelledError, JsonRpcException):
            # First: a cancelled model call is both a ModelError and a CancelledError, and it is not a failure.
            raise
        except InvalidArgument as exc:
            raise JsonRpcInvalidParams(exc.message) from None
        except (UserError, ModelError) as exc:
            log.warning("%s failed: %s", name, exc)
            raise JsonRpcException(cap(str(exc), 2000), code=USER_ERROR_CODE) from None
        except OSError as exc:
            log.warning("%s failed: %s", name, one_line(exc), exc_info=exc)
            raise JsonRpcException(os_error_message(name, exc), code=USER_ERROR_CODE) from None
        except Exception as exc:
            log.error("%s crashed: %s", name, one_line(exc), exc_info=exc)
            raise JsonRpcInternalError(internal_error_message(name)) from None
        finally:
            if request_id is not None:
                ls.running.pop(request_id, None)

    run.__name__ = f"command_{name.replace('.', '_')}"


def check_path_arguments(args: object) -> None:
    """InvalidArgument for a path argument no file system can take (before any operation trips over it)."""
    if not attrs.has(type(args)):
        return
    for field in PATH_FIELDS:
        value = getattr(args, field, None)
        if not isinstance(value, str):
            continue
        if len(value) > MAX_PATH_ARGUMENT:
            raise InvalidArgument(field, f"is {len(value)} characters long; no file path is that long")
        if "\x00" in value or "%00" in value:
            raise InvalidArgument(field, "contains a NUL character, which no file name may hold")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(field, "is not valid Unicode (it holds a lone surrogate)") from None


def os_error_message(command: str, error: OSError) -> str:
    """What the system refused, for which file: `nagent.split failed: File name too long ('/aaa…')`."""
    reason = os.strerror(error.errno) if error.errno else "the file system refused the operation"
    where = f" ({shown(os.fsdecode(error.filename), 120)})" if isinstance(error.filename, (str, bytes)) else ""
    return f"{command} failed: {reason}{where}"
