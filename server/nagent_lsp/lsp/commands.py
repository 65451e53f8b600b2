"""The command table: every `workspace/executeCommand` command by name, its argument class and its handler, run
by one dispatcher with one error policy.

Every command takes one JSON object, parsed here once into the command's typed arguments (config.parse_args), so
operations only ever see typed values; a string that no file, log or model could take (a lone surrogate, a NUL)
is refused there for every field, and a path argument (`uri`, `indexPath`) thousands of characters long or
holding a percent-encoded NUL here, each naming the field. Errors become JSON-RPC errors with a message a person
can act on: an unknown command or InvalidArgument (a bad field, named) → InvalidParams, UserError/ModelError → a
request error with the operation's message, an OSError → a request error saying what the system refused and
for which file, anything else → an internal error pointing at the log. Never Python exception text in the
answer (the traceback goes to the log at -v), never a crash and never a silent null.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, cast

import attrs
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from nagent_lsp.config.convert import to_wire
from nagent_lsp.config.parse_args import parse_args
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.logs import cap, one_line
from nagent_lsp.core.model import ModelError
from nagent_lsp.lsp.rpc import internal_error_message, quoted

log = logging.getLogger("nagent_lsp")

# JSON-RPC "server error" range: a failure the user must act on, distinct from a bug.
USER_ERROR_CODE = -32001
PATH_FIELDS = ("uri", "indexPath")  # arguments that name a file
MAX_PATH_ARGUMENT = 8192  # characters: far beyond PATH_MAX (4096) even percent-encoded

A = TypeVar("A")
S = TypeVar("S", bound=LanguageServer)  # the server class (lsp/server.py's NagentServer, which imports this module)
Result = dict[str, Any]
# What an operation returns: a typed result (attrs, turned into JSON by `to_wire`) or, while operations move to typed
# results, a JSON-ready dict; an async handler returns an awaitable of it.
Handler = Callable[[S, A], object]


@attrs.frozen
class Command(Generic[S, A]):
    """One row of the table: `handler(server, args)` with the argument parsed into `args_type`. A sync handler
    runs in a worker thread so git or disk work never stalls the loop."""

    name: str
    args_type: type[A]
    handler: Handler[S, A]

    async def run(self, server: S, arguments: Sequence[Any] | None) -> Result:
        args = parse_args(self.args_type, list(arguments or []))
        check_path_arguments(args)
        if inspect.iscoroutinefunction(self.handler):
            result = await cast(Awaitable[object], self.handler(server, args))
        else:
            result = await asyncio.to_thread(self.handler, server, args)
        return to_wire(result)  # a typed result (attrs) becomes its camelCase JSON; a dict passes through


class CommandTable(Generic[S]):
    """name → Command; `execute` is the only way a command runs (`workspace/executeCommand`, and
    `nagent.codeAction.run` running the command its code action names)."""

    def __init__(self) -> None:
        self.commands: dict[str, Command[S, Any]] = {}

    def add(self, server: S, name: str, args_type: type[A], handler: Handler[S, A]) -> None:
        if name in self.commands:
            raise ValueError(f"command {name} is registered twice")
        self.commands[name] = Command(name, args_type, handler)
        # pygls builds the initialize result's executeCommandProvider from its own registry: list the name there
        # (requests never reach that entry: the executeCommand handler dispatches through this table).
        server.command(name)(_listed)

    def __contains__(self, name: object) -> bool:
        return name in self.commands

    async def execute(self, server: S, name: str, arguments: Sequence[Any] | None) -> Result:
        command = self.commands.get(name)
        if command is None:
            raise JsonRpcInvalidParams(f"command: nagent-lsp has no command {quoted(name)}")
        try:
            return await command.run(server, arguments)
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


def _listed(*_arguments: Any) -> None:
    """The entry of every command in pygls' registry (see CommandTable.add); never called."""
    raise AssertionError("commands run through lsp.commands.CommandTable")


class HasCommands(Protocol):
    @property
    def commands(self) -> CommandTable[Any]: ...


T = TypeVar("T", bound=HasCommands)


def register_command(server: T, name: str, args_type: type[A], handler: Callable[[T, A], object]) -> None:
    """Add a row to the server's command table."""
    server.commands.add(server, name, args_type, handler)


def check_path_arguments(args: object) -> None:
    """InvalidArgument for a path argument no file system can take (before any operation trips over it); a raw
    NUL or lone surrogate in any string was already refused by config.parse_args.parse_args."""
    if not attrs.has(type(args)):
        return
    for field in PATH_FIELDS:
        value = getattr(args, field, None)
        if not isinstance(value, str):
            continue
        if len(value) > MAX_PATH_ARGUMENT:
            raise InvalidArgument(field, f"is {len(value)} characters long; no file path is that long")
        if "%00" in value:
            raise InvalidArgument(field, "contains a NUL character, which no file name may hold")


def os_error_message(command: str, error: OSError) -> str:
    """What the system refused, for which file: `nagent.split failed: File name too long ('/aaa…')`."""
    reason = os.strerror(error.errno) if error.errno else "the file system refused the operation"
    where = f" ({quoted(os.fsdecode(error.filename), 120)})" if isinstance(error.filename, (str, bytes)) else ""
    return f"{command} failed: {reason}{where}"
