"""The language server class: its state (the session, running requests, problems waiting for the client), the
byte stream it reads, the JSON-RPC checks every message goes through, and cancellation.

Features register themselves on it (lsp/features/*); `lsp/app.py` builds one with every feature.

Every request with an id gets an answer (DESIGN §12). pygls drops a message it cannot turn into its typed form
and answers a crash with the Python traceback; here, before a message reaches pygls' dispatch:

- the stream is framed by `lsp/transport.py` (resynchronising after a broken header, skipping huge bodies);
- a body that is not UTF-8 or not JSON gets -32700, a broken envelope (no method, a non-string method, a bad
  id, params neither object nor array, a batch) -32600, an unknown method -32601, params that do not fit the
  method -32602 naming the field (`lsp/rpc.py`), a request before `initialize` -32002, after `shutdown` -32600;
- a handler's unexpected exception becomes -32603 with a message that names the method and points at the log:
  the traceback goes to the log file / stderr (at -v), never into a response or a window/logMessage.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import queue
import re
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import cattrs
from cattrs.errors import BaseValidationError
from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.uris import to_fs_path

from nagent_lsp import __version__
from nagent_lsp.core.logs import one_line
from nagent_lsp.lsp.commands import CommandTable
from nagent_lsp.lsp.pygls_private import ContainedProtocol
from nagent_lsp.lsp.rpc import (
    describe_params_error,
    has_lone_surrogate,
    internal_error_message,
    json_kind,
    quoted,
    salvage_id,
    strict_converter,
)
from nagent_lsp.lsp.transport import MAX_BODY, READ_SIZE, Event, Frame, Junk, Oversized, serve
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")

MsgId = int | str
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
SERVER_NOT_INITIALIZED, REQUEST_CANCELLED = -32002, -32800
MAX_ERROR_MESSAGE = 2000  # characters of an error message sent to the client
_FRAME_HEADER = b"Content-Length:"
_ERRNO = re.compile(r"\[Errno -?\d+\] ")


def _valid_id(value: object) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _echo_id(value: object) -> Any:
    """The id to answer with: the client's own when it can match it, else null (JSON-RPC's rule)."""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class NagentProtocol(ContainedProtocol):
    """pygls' LSP protocol with every message checked before dispatch, and answers that never carry Python
    exception text. pygls' private hooks are reached only through `ContainedProtocol` (lsp/pygls_private.py)."""

    def __init__(self, server: NagentServer, converter: cattrs.Converter):
        super().__init__(server, converter)
        self.nagent_server = server
        self.converter = converter
        self._methods: dict[Any, str] = {}  # request id -> method, while the request runs
        self._initialize_seen = False

    # -- the byte stream ----------------------------------------------------------------------------------

    def handle_event(self, event: Event) -> bytes | None:
        """One framing event (lsp/transport.py); returns bytes to read again when a body held the next header."""
        if isinstance(event, Frame):
            return self._handle_body(event.body)
        if isinstance(event, Oversized):
            log.warning("ignored a message of %d bytes (at most %d are accepted)", event.length, MAX_BODY)
            self._reply(
                None,
                INVALID_REQUEST,
                f"Invalid request: a message of {event.length} bytes is larger than nagent-lsp "
                f"accepts ({MAX_BODY} bytes); it was skipped",
            )
            return None
        self._handle_junk(event)
        return None

    def _handle_junk(self, junk: Junk) -> None:
        data = junk.data.strip()
        if not data:
            if junk.reason != "bytes outside any message":
                log.warning("ignored %s", junk.reason)
            return
        if data[:1] in (b"{", b"["):  # a body whose header was lost or lacked Content-Length: try it as a message
            try:
                message, end = json.JSONDecoder(parse_constant=_no_constant).raw_decode(data.decode("utf-8"))
            except (ValueError, RecursionError):
                message, end = None, 0
            if isinstance(message, (dict, list)):
                log.warning("a message arrived without a valid Content-Length header; handled anyway")
                self._dispatch(message)
                rest = data.decode("utf-8")[end:].strip()
                if rest:
                    self._handle_junk(Junk(rest.encode("utf-8"), junk.reason))
                return
        log.warning("ignored %d bytes that were not a JSON-RPC message (%s)", len(data), junk.reason)
        self._reply(
            None,
            PARSE_ERROR,
            f"Parse error: {len(data)} bytes arrived outside any Content-Length frame ({junk.reason}) and were ignored",
        )

    def _handle_body(self, body: bytes) -> bytes | None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            found, msg_id = self._id_in(body.decode("utf-8", "replace"))
            self._reply(
                msg_id if found else None,
                PARSE_ERROR,
                f"Parse error: the message is not valid UTF-8 (byte {exc.start} of {len(body)})",
            )
            return None
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            found, msg_id = salvage_id(text)
            self._reply(
                _echo_id(msg_id) if found else None,
                INVALID_REQUEST,
                "Invalid request: the message is nested too deeply (nagent-lsp reads up to about "
                f"{sys.getrecursionlimit() - 100} levels)",
            )
            return None
        except ValueError as exc:
            at = body.find(_FRAME_HEADER, 1)
            if at > 0:
                # The declared length ran into the next message: answer what came before it, read on from its header.
                self._handle_junk(Junk(body[:at], "a message shorter than its Content-Length"))
                return body[at:]
            where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            found, msg_id = salvage_id(text)  # a request cut short still names its id: answer that id
            self._reply(
                _echo_id(msg_id) if found else None,
                PARSE_ERROR,
                f"Parse error: the message is not valid JSON ({reason}{where})",
            )
            return None
        self._dispatch(data)
        return None

    def _id_in(self, text: str) -> tuple[bool, Any]:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return salvage_id(text)
        if isinstance(data, dict) and "id" in data and "method" in data:
            return True, _echo_id(data["id"])
        return False, None

    # -- envelopes ----------------------------------------------------------------------------------------

    def _dispatch(self, data: Any) -> None:
        if isinstance(data, list):
            self._batch(data)
            return
        if not isinstance(data, dict):
            self._reply(
                None, INVALID_REQUEST, f"Invalid request: a message must be a JSON object, not {json_kind(data)}"
            )
            return
        has_id, raw_id = "id" in data, data.get("id")
        if "method" not in data:
            if has_id and ("result" in data or "error" in data):
                self._client_response(data)
            else:
                self._reply(
                    _echo_id(raw_id),
                    INVALID_REQUEST,
                    'Invalid request: a request needs a "method" (and a response a "result" or an "error")',
                )
            return
        method, params = data["method"], data.get("params")
        problem = None
        if data.get("jsonrpc") != "2.0":
            problem = 'the "jsonrpc" member must be "2.0"'
        elif not isinstance(method, str):
            problem = f'"method" must be a string, not {json_kind(method)}'
        elif has_id and not _valid_id(raw_id):
            problem = f'"id" must be an integer or a string, not {json_kind(raw_id)}'
        elif has_id and isinstance(raw_id, str) and has_lone_surrogate(raw_id):
            problem = '"id" is not valid Unicode (it holds a lone surrogate)'
        elif has_lone_surrogate(method):
            problem = '"method" is not valid Unicode (it holds a lone surrogate)'
        elif params is not None and not isinstance(params, (dict, list)):
            problem = f'"params" must be an object or an array, not {json_kind(params)}'
        if problem is not None:
            if has_id:
                self._reply(_echo_id(raw_id), INVALID_REQUEST, f"Invalid request: {problem}")
            else:
                log.warning("ignored a notification: %s", problem)
            return
        if has_id:
            self._request(raw_id, method, data)
        else:
            self._notification(method, data)

    def _batch(self, items: list[Any]) -> None:
        text = "Invalid request: JSON-RPC batches are not part of LSP; send each message in a frame of its own"
        answered = False
        for item in items:
            if isinstance(item, dict) and "method" in item and _valid_id(item.get("id")):
                self._reply(item["id"], INVALID_REQUEST, text)
                answered = True
        if not answered:
            self._reply(None, INVALID_REQUEST, text)

    def _has_handler(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def _request(self, msg_id: Any, method: str, data: dict[str, Any]) -> None:
        if self.shutting_down and method != types.EXIT:
            self._reply(
                msg_id,
                INVALID_REQUEST,
                f"Invalid request: the server is shutting down (shutdown was received), so {quoted(method)} is refused",
            )
            return
        if not self._initialize_seen and method != types.INITIALIZE:
            self._reply(
                msg_id,
                SERVER_NOT_INITIALIZED,
                f"The server is not initialized yet: send initialize before {quoted(method)}",
            )
            return
        if method == types.INITIALIZE and self._initialize_seen:
            self._reply(msg_id, INVALID_REQUEST, "Invalid request: the server is already initialized")
            return
        if not self._has_handler(method):
            self._reply(msg_id, METHOD_NOT_FOUND, f"Method not found: nagent-lsp does not implement {quoted(method)}")
            return
        try:
            message = self._structure(method, data, request=True)
        except Exception as exc:
            self._reply(msg_id, INVALID_PARAMS, self._params_problem(method, data, exc))
            return
        if method == types.INITIALIZE:
            self._initialize_seen = True
        self._methods[msg_id] = method
        try:
            self.handle_message(message)
        except Exception as exc:
            self._log_failure(method, exc)
            self._reply(msg_id, INTERNAL_ERROR, internal_error_message(method))

    def _notification(self, method: str, data: dict[str, Any]) -> None:
        if not self._initialize_seen and method != types.EXIT:
            log.info("ignored %s before initialize", quoted(method))
            return
        if method != types.CANCEL_REQUEST and not self._has_handler(method):
            log.debug("ignored notification %s (not implemented)", quoted(method))
            return
        try:
            message = self._structure(method, data, request=False)
        except Exception as exc:
            log.warning("ignored notification: %s", self._params_problem(method, data, exc))
            return
        try:
            self.handle_message(message)
        except Exception as exc:
            self._log_failure(method, exc)

    def _structure(self, method: str, data: dict[str, Any], *, request: bool) -> Any:
        message_type = self.get_message_type(method)
        if message_type is None:  # a method of our own, outside the LSP types: params as sent
            if request:
                return JsonRPCRequestMessage(id=data["id"], method=method, jsonrpc="2.0", params=data.get("params"))
            return JsonRPCNotification(method=method, params=data.get("params"), jsonrpc="2.0")
        return self.converter.structure(data, message_type)

    @staticmethod
    def _params_problem(method: str, data: dict[str, Any], exc: Exception) -> str:
        if isinstance(exc, BaseValidationError):
            if data.get("params") is None:
                return f"Invalid params: {quoted(method)} needs params (an object); none were sent"
            return f"Invalid params for {quoted(method)}: {describe_params_error(exc, data)}"
        log.info("params of %s could not be read: %s", quoted(method), one_line(exc))
        return f"Invalid params for {quoted(method)}: they could not be read"

    def _client_response(self, data: dict[str, Any]) -> None:
        msg_id: Any = data.get("id")
        future = self.request_future(msg_id) if _valid_id(msg_id) else None
        if future is None:
            log.info("ignored a response to an unknown request id")
            return
        message: Any
        try:
            if data.get("jsonrpc") != "2.0":
                raise ValueError('the "jsonrpc" member must be "2.0"')
            if "error" in data:
                message = self.converter.structure(data, types.ResponseErrorMessage)
            else:
                message = self.converter.structure(data, self.result_type(msg_id) or JsonRPCResponseMessage)
        except Exception as exc:
            detail = describe_params_error(exc, data) if isinstance(exc, BaseValidationError) else one_line(exc)
            log.warning("the editor's answer to a request could not be read: %s", detail)
            self.forget_request(msg_id)
            if not future.done():
                future.set_exception(JsonRpcException(f"the editor's answer could not be read: {detail}"))
            return
        self.handle_message(message)

    # -- answers ------------------------------------------------------------------------------------------

    def _reply(self, msg_id: Any, code: int, message: str) -> None:
        """An error answer of our own (already worded for a person); id null when the request's id is unknown."""
        self._methods.pop(msg_id, None)
        error = {"code": code, "message": message[:MAX_ERROR_MESSAGE]}
        self.write_message({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def request_failed(self, msg_id: MsgId, method: str, error: Exception) -> None:
        if isinstance(error, JsonRpcException):
            self._send_error(msg_id, error)
            return
        self._log_failure(method, error)
        self._reply(msg_id, INTERNAL_ERROR, internal_error_message(method))

    def answer(self, msg_id: MsgId, method: str, future: Future[Any]) -> None:
        self._methods.pop(msg_id, None)
        if future.cancelled():
            self._reply(msg_id, REQUEST_CANCELLED, f"{method} was cancelled")
            return
        error = future.exception()
        if error is None:
            self.write_message({"jsonrpc": "2.0", "id": msg_id, "result": future.result()})
        elif isinstance(error, JsonRpcException):
            self._send_error(msg_id, error)
        elif isinstance(error, asyncio.CancelledError):  # a handler that gave up on a cancelled wait of its own
            self._reply(msg_id, REQUEST_CANCELLED, f"{method} was cancelled")
        else:
            self._log_failure(method, error)
            self._reply(msg_id, INTERNAL_ERROR, internal_error_message(method))

    def _send_error(self, msg_id: MsgId, error: JsonRpcException) -> None:
        # The message only: pygls' exceptions put a traceback in `data`, and some quote Python's own text.
        text = str(error.message or "")
        if "Traceback (most recent call last)" in text or not text:
            text = internal_error_message(self._methods.get(msg_id, "the request"))
        text = _ERRNO.sub("", text)  # "[Errno 2] No such file…" reads as "No such file…"
        self._reply(msg_id, error.code if isinstance(error.code, int) else INTERNAL_ERROR, text)

    def notification_failed(self, method: str, error: BaseException) -> None:
        self._log_failure(method, error)

    async def execute_command(self, params: types.ExecuteCommandParams) -> Any:
        server = self.nagent_server
        return await server.commands.execute(server, params.command, params.arguments)

    def _json(self, value: Any) -> Any:
        """json.dumps' fallback for what lsprotocol and pygls hand over: attrs classes and enums."""
        if attrs.has(type(value)):
            return self.converter.unstructure(value)
        if isinstance(value, enum.Enum):
            return value.value
        raise TypeError(f"{type(value).__name__} is not JSON")

    def write_message(self, data: Any) -> None:
        """One message to the client; a reply that cannot be encoded becomes an error reply instead of silence."""
        if not data or self.writer is None:
            return
        try:
            body = json.dumps(data, default=self._json)
        except Exception as exc:  # TypeError, ValueError, RecursionError
            log.error("could not encode a message for the client: %s", one_line(exc))
            msg_id = getattr(data, "id", None) if not isinstance(data, dict) else data.get("id")
            if msg_id is None or (getattr(data, "method", None) if not isinstance(data, dict) else data.get("method")):
                return
            method = self._methods.pop(msg_id, "the request")
            error = {"code": INTERNAL_ERROR, "message": internal_error_message(method)}
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error})
        log.debug("sending %d characters", len(body))
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        try:
            result = self.writer.write((header + body).encode(self.CHARSET))
        except BrokenPipeError:
            log.error("the connection to the editor is lost")
            raise
        except (OSError, ValueError) as exc:  # ValueError: the stream is closed (after exit)
            log.info("could not write to the editor: %s", one_line(exc))
            return
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            asyncio.ensure_future(result)

    @staticmethod
    def _log_failure(method: str, error: BaseException) -> None:
        # One line for the editor; the traceback only reaches the log file / stderr at -v (core.logs).
        log.error("%s failed: %s", quoted(method, 80), one_line(error), exc_info=error)


class NagentServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("nagent-lsp", __version__, protocol_cls=NagentProtocol, converter_factory=strict_converter)
        # every nagent.* command (lsp/commands.py), run by workspace/executeCommand
        self.commands: CommandTable[NagentServer] = CommandTable()
        self.stopping = threading.Event()  # set by shutdown(): the transport stops reading
        self.tcp_server: asyncio.Server | None = None
        self.session = Session()
        self.client_ready = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop serving the client, once initialized
        self.pending_problems: list[str] = []  # found before the client can be shown messages
        self.background: set[asyncio.Future[Any]] = set()  # fire-and-forget work, kept referenced until it ends
        self.review_shown: set[str] = set()  # documents last sent pending hunks as diagnostics (lsp/port.py)

    def in_background(self, future: asyncio.Future[Any]) -> None:
        """Keep fire-and-forget work referenced until it ends; its failure is logged, not lost."""
        self.background.add(future)

        def done(f: asyncio.Future[Any]) -> None:
            self.background.discard(f)
            if not f.cancelled() and (error := f.exception()) is not None:
                log.error("background work failed: %s", one_line(error), exc_info=error)

        future.add_done_callback(done)

    @property
    def nagent_protocol(self) -> NagentProtocol:
        assert isinstance(self.protocol, NagentProtocol)
        return self.protocol

    def report_server_error(self, error: Exception, source: Any) -> None:
        # A failed request already answered with its error (and was logged where it failed); other out-of-band
        # errors are logged (and so forwarded as logMessage), never popped up on every glitch.
        if isinstance(error, JsonRpcException) or source is FeatureRequestError:
            return
        log.error("server error: %s", one_line(error))

    # -- transports: pygls' own, on our framing (lsp/transport.py) ----------------------------------------------

    def shutdown(self) -> None:
        self.stopping.set()
        if self.tcp_server is not None:
            self.tcp_server.close()
        super().shutdown()

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = _ChunkReader(stdin or sys.stdin.buffer)
        try:
            asyncio.run(serve(reader, self.nagent_protocol.handle_event, self.stopping.is_set))
        except BrokenPipeError:
            log.error("the connection to the editor is lost; shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        stop = self.stopping
        exit_code: list[Any] = []

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)
            try:
                await serve(lambda: reader.read(READ_SIZE), self.nagent_protocol.handle_event, stop.is_set)
            except SystemExit as exit_:  # the `exit` notification: end the server, not just this connection
                exit_code.append(exit_.code)
            finally:
                self.shutdown()

        async def main() -> None:
            self.tcp_server = server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s:%s", host, port)
            async with server:
                await server.serve_forever()

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass
        if exit_code:
            raise SystemExit(exit_code[0])

    def folder_paths(self) -> list[Path]:
        try:
            folders = self.workspace.folders
        except RuntimeError:
            return []
        paths = [Path(path) for f in folders.values() if (path := to_fs_path(f.uri))]
        if not paths and self.workspace.root_path:
            paths = [Path(self.workspace.root_path)]
        return paths


class _ChunkReader:
    """Chunks of a binary stream, read by a daemon thread one request at a time (the stream is read only as fast
    as the server takes messages, and a blocked read never holds up the process's exit)."""

    def __init__(self, stream: BinaryIO):
        self._read = self._reader(stream)
        self._requests: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[bytes]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="nagent-stdin", daemon=True).start()

    @staticmethod
    def _reader(stream: BinaryIO) -> Callable[[], bytes]:
        import os

        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            read1 = getattr(stream, "read1", None) or stream.read
            return lambda: read1(READ_SIZE)
        return lambda: os.read(fd, READ_SIZE)

    def __call__(self) -> Awaitable[bytes]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self._requests.put((loop, future))
        return future

    def _run(self) -> None:
        while True:
            loop, future = self._requests.get()
            try:
                data = self._read()
            except OSError:
                data = b""
            try:
                loop.call_soon_threadsafe(_resolve, future, data)
            except RuntimeError:  # the loop is closed: the server is gone
                return
            if not data:
                return


def _resolve(future: asyncio.Future[bytes], data: bytes) -> None:
    if not future.done():
        future.set_result(data)
