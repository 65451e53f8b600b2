"""Errors a person can act on (issue 12 item 8), in process: what a crashing handler, an answer that cannot be
encoded or an OSError in a command turn into, and how log records are capped and kept free of tracebacks."""

from __future__ import annotations

import asyncio
import json
import logging
import logging.handlers
from pathlib import Path
from typing import Any

import attrs
import pytest
from lsprotocol import types

from nagent_lsp.core.logs import MAX_RECORD, CappedFormatter, setup_logging
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.log_forwarding import CLIENT_MESSAGE_CHARS, ClientForwarder
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.lsp.transport import Frame

pytestmark = pytest.mark.abuse


class Capture:
    """A writer for the protocol: every message it is given, parsed; `arrived` is set on each."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    def write(self, data: bytes) -> None:
        body = data.split(b"\r\n\r\n", 1)[1]
        self.messages.append(json.loads(body))
        self.arrived.set()

    def close(self) -> None:
        pass

    def answer(self, msg_id: Any) -> dict[str, Any] | None:
        return next((m for m in self.messages if m.get("id") == msg_id and "method" not in m), None)


def started_server() -> tuple[NagentServer, Capture]:
    server = NagentServer()
    capture = Capture()
    server.protocol.set_writer(capture)
    send(server, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"processId": None, "capabilities": {}}})
    return server, capture


def send(server: NagentServer, message: dict[str, Any]) -> None:
    server.nagent_protocol.handle_event(Frame(json.dumps(message).encode()))


async def answer_of(capture: Capture, msg_id: Any) -> dict[str, Any]:
    while (found := capture.answer(msg_id)) is None:
        capture.arrived.clear()
        await asyncio.wait_for(capture.arrived.wait(), 30)
    return found


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_a_crashing_handler_answers_an_internal_error_without_its_text() -> None:
    server, capture = started_server()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def crash(ls: NagentServer, params: types.HoverParams) -> None:
        raise ValueError("embedded null byte")

    params = {"textDocument": {"uri": "file:///x"}, "position": {"line": 0, "character": 0}}
    logger, seen = logging.getLogger("nagent_lsp"), Records()
    logger.addHandler(seen)
    try:
        send(server, {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": params})
        answer = await answer_of(capture, 1)
    finally:
        logger.removeHandler(seen)
    error = answer["error"]
    assert error["code"] == -32603 and "data" not in error
    assert "textDocument/hover failed because of an internal error" in error["message"]
    assert "ValueError" not in error["message"] and "null byte" not in error["message"]
    # The log has the exception (its traceback goes to the log file at -v, never to the editor).
    record = next(r for r in seen.records if "textDocument/hover" in r.getMessage())
    assert record.exc_info is not None


async def test_an_answer_that_cannot_be_encoded_becomes_an_error_answer() -> None:
    server, capture = started_server()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def unencodable(ls: NagentServer, params: types.HoverParams) -> Any:
        return {"value": object()}

    params = {"textDocument": {"uri": "file:///x"}, "position": {"line": 0, "character": 0}}
    send(server, {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": params})
    answer = await answer_of(capture, 2)
    assert answer["error"]["code"] == -32603 and "internal error" in answer["error"]["message"]


@attrs.frozen
class PathArgs:
    uri: str


async def test_an_os_error_in_a_command_says_what_the_system_refused_and_for_which_file() -> None:
    server, capture = started_server()
    long_name = "/tmp/" + "a" * 5000

    def fails(ls: NagentServer, args: PathArgs) -> dict[str, Any]:
        raise OSError(36, "File name too long", long_name)

    register_command(server, "nagent.test.oserror", PathArgs, fails)
    params = {"command": "nagent.test.oserror", "arguments": [{"uri": "file:///tmp/x"}]}
    send(server, {"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": params})
    error = (await answer_of(capture, 3))["error"]
    assert error["code"] == -32001
    assert error["message"].startswith("nagent.test.oserror failed: File name too long ('/tmp/aaaa")
    assert "[Errno" not in error["message"] and "OSError" not in error["message"]
    assert len(error["message"]) < 300


async def test_an_unexpected_exception_in_a_command_points_at_the_log() -> None:
    server, capture = started_server()

    def fails(ls: NagentServer, args: PathArgs) -> dict[str, Any]:
        raise UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed")

    register_command(server, "nagent.test.crash", PathArgs, fails)
    params = {"command": "nagent.test.crash", "arguments": [{"uri": "file:///tmp/x"}]}
    send(server, {"jsonrpc": "2.0", "id": 4, "method": "workspace/executeCommand", "params": params})
    error = (await answer_of(capture, 4))["error"]
    assert error["code"] == -32603 and "data" not in error
    assert "nagent.test.crash failed because of an internal error" in error["message"]
    assert "surrogates" not in error["message"] and "Unicode" not in error["message"]


def _record_with_traceback(message: str) -> logging.LogRecord:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        return logging.LogRecord("nagent_lsp", logging.ERROR, __file__, 1, message, (), sys.exc_info())


def test_log_records_are_capped_and_carry_a_traceback_only_at_verbose() -> None:
    record = _record_with_traceback("x" * (3 * MAX_RECORD))
    quiet = CappedFormatter("%(levelname)s %(message)s", tracebacks=False, omitted=" (run with -v)")
    loud = CappedFormatter("%(levelname)s %(message)s", tracebacks=True)
    quiet_text = quiet.format(record)
    loud_text = loud.format(record)
    assert len(quiet_text) < MAX_RECORD + 100 and "more characters]" in quiet_text
    assert "Traceback" not in quiet_text and quiet_text.endswith("(run with -v)")
    assert "Traceback (most recent call last)" in loud_text and "RuntimeError: boom" in loud_text
    # Formatting with a traceback first never makes the quiet form carry it (no cached exc_text).
    assert "Traceback" not in quiet.format(record)


def test_the_editor_gets_one_capped_line_without_a_traceback() -> None:
    forwarder = ClientForwarder(NagentServer())
    text = forwarder.format(_record_with_traceback("failed: " + "u" * 50_000))
    assert len(text) <= CLIENT_MESSAGE_CHARS + 40 and "Traceback" not in text and "\n" not in text


def test_a_log_file_rotates(tmp_path: Path) -> None:
    names = ("nagent_lsp", "pygls", "asyncio")
    saved = [(logging.getLogger(n), logging.getLogger(n).handlers[:], logging.getLogger(n).propagate) for n in names]
    logger = setup_logging(0, str(tmp_path / "server.log"))
    try:
        (handler,) = logger.handlers
        assert isinstance(handler, logging.handlers.RotatingFileHandler)
        assert 0 < handler.maxBytes <= 10 * 1024 * 1024 and handler.backupCount >= 1
        for _ in range(3):
            logger.warning("%s", "w" * (MAX_RECORD * 2))
        handler.flush()
        lines = (tmp_path / "server.log").read_text().splitlines()
        assert len(lines) == 3 and all(len(line) < MAX_RECORD + 200 for line in lines)
    finally:
        for each, handlers, propagate in saved:
            for handler in each.handlers:
                if handler not in handlers:
                    handler.close()
            each.handlers[:] = handlers
            each.propagate = propagate


async def test_errno_prefixes_do_not_reach_the_editor() -> None:
    from nagent_lsp.core.errors import UserError

    server, capture = started_server()

    def fails(ls: NagentServer, args: PathArgs) -> dict[str, Any]:
        raise UserError("could not read x.py: [Errno 2] No such file or directory: 'x.py'")

    register_command(server, "nagent.test.errno", PathArgs, fails)
    params = {"command": "nagent.test.errno", "arguments": [{"uri": "file:///tmp/x"}]}
    send(server, {"jsonrpc": "2.0", "id": 5, "method": "workspace/executeCommand", "params": params})
    error = (await answer_of(capture, 5))["error"]
    assert error == {"code": -32001, "message": "could not read x.py: No such file or directory: 'x.py'"}
