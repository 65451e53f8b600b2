"""Every JSON-RPC request with an id is answered with the right code and a message a person can act on (issue 12
items 4 and 8), through the real server over raw stdio: one server for the module, no model configured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.abuse.rawserver import MISSING, RawServer, frame, server_env
from tests.harness.gitrepo import Commit, build_repo

pytestmark = pytest.mark.abuse

MAX_LINE = 2**31 - 1


class Server(RawServer):
    app_uri = ""
    early_answer: dict[str, Any] | None = None  # the answer to a hover sent before initialize


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("protocol")
    ws, home = base / "ws", base / "home"
    home.mkdir()
    build_repo(ws, [Commit("add app", {"app.py": "print('hi')\n"})])
    raw = Server(ws, server_env(home, {}), verbose=False)  # -v0 and no log file: the log is stderr
    raw.start()
    raw.app_uri = (ws / "app.py").as_uri()
    raw.early_answer = raw.call("textDocument/hover", hover_params(raw.app_uri, 0, 0))
    answer = raw.call(
        "initialize",
        {"processId": None, "rootUri": ws.as_uri(), "capabilities": {"window": {"workDoneProgress": True}}},
    )
    assert answer and "result" in answer, answer
    raw.notify("initialized", {})
    yield raw
    assert raw.stop() == 0


def hover_params(uri: str, line: Any, character: Any) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def error_of(answer: dict[str, Any] | None) -> tuple[int, str]:
    assert answer is not None, "no answer"
    assert "error" in answer, f"expected an error, got {answer}"
    error = answer["error"]
    assert "data" not in error or not error["data"], f"error data: {error['data']!r}"
    text = error["message"]
    assert "Traceback" not in text and "[Errno" not in text, text
    return error["code"], text


def test_a_request_before_initialize_is_refused_as_not_initialized(server: Server) -> None:
    code, text = error_of(server.early_answer)
    assert code == -32002 and "initialize" in text


@pytest.mark.parametrize(
    "line, character, field, expected",
    [
        (-1, 0, "params.position.line", "an integer from 0 to 2147483647"),
        (MAX_LINE + 1, 0, "params.position.line", "an integer from 0 to 2147483647"),
        (0, 10**30, "params.position.character", "an integer from 0 to 2147483647"),
        (1.5, 0, "params.position.line", "expected an integer, got a number with a fraction"),
        ("3", 0, "params.position.line", "expected an integer, got a string"),
        (None, 0, "params.position.line", "expected an integer, got null"),
        (True, 0, "params.position.line", "expected an integer, got a boolean"),
    ],
)
def test_positions_outside_the_range_or_not_integers_name_the_field(
    server: Server, line: Any, character: Any, field: str, expected: str
) -> None:
    code, text = error_of(server.call("textDocument/hover", hover_params(server.app_uri, line, character)))
    assert code == -32602
    assert field in text and expected in text, text


def test_the_largest_position_is_answered(server: Server) -> None:
    answer = server.call("textDocument/hover", hover_params(server.app_uri, MAX_LINE, MAX_LINE))
    assert answer is not None and "result" in answer, answer


@pytest.mark.parametrize("params", [MISSING, None])
def test_a_request_without_params_is_answered(server: Server, params: Any) -> None:
    code, text = error_of(server.call("textDocument/hover", params))
    assert code == -32602 and "needs params" in text and "textDocument/hover" in text


def test_a_request_without_params_that_needs_none_succeeds(server: Server) -> None:
    answer = server.call("workspace/executeCommand", {"command": "nagent.status"})
    assert answer is not None and answer["result"]["version"], answer


def test_ill_typed_code_action_params_name_the_field(server: Server) -> None:
    params = {
        "textDocument": {"uri": server.app_uri},
        "range": {"start": 5, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": "none"},
    }
    code, text = error_of(server.call("textDocument/codeAction", params))
    assert code == -32602
    assert "params.range.start" in text and "params.context.diagnostics: expected an array" in text, text


@pytest.mark.parametrize("arguments", ["abc", 5, {"uri": "file:///x"}, True])
def test_arguments_that_are_not_a_list(server: Server, arguments: Any) -> None:
    code, text = error_of(server.call("workspace/executeCommand", {"command": "nagent.status", "arguments": arguments}))
    assert code == -32602 and "params.arguments: expected an array" in text, text


@pytest.mark.parametrize("method", ["textDocument/completion", "", "$/custom", "nagent.status", "x" * 5000])
def test_unknown_methods_are_method_not_found(server: Server, method: str) -> None:
    code, text = error_of(server.call(method, {}))
    assert code == -32601 and "does not implement" in text
    assert len(text) < 300, "a 5000-character method name is not echoed whole"


def test_unknown_command_names_it(server: Server) -> None:
    code, text = error_of(server.call("workspace/executeCommand", {"command": "nagent.nope"}))
    assert code == -32602 and "nagent.nope" in text


@pytest.mark.parametrize(
    "envelope, words",
    [
        ({"jsonrpc": "1.0", "method": "textDocument/hover"}, '"jsonrpc" member must be "2.0"'),
        ({"method": "textDocument/hover"}, '"jsonrpc" member must be "2.0"'),
        ({"jsonrpc": "2.0", "method": 5}, '"method" must be a string'),
        ({"jsonrpc": "2.0", "method": None}, '"method" must be a string'),
        ({"jsonrpc": "2.0"}, 'needs a "method"'),
        ({"jsonrpc": "2.0", "method": "textDocument/hover", "params": "x"}, '"params" must be an object or an array'),
    ],
)
def test_broken_envelopes_with_an_id_are_invalid_requests(server: Server, envelope: dict, words: str) -> None:
    msg_id = server.new_id()
    server.send_bytes(frame({**envelope, "id": msg_id}))
    assert server.wait_for([msg_id]) == []
    code, text = error_of(server.answer(msg_id))
    assert code == -32600 and words in text, text


def test_a_fractional_id_is_answered_under_that_id(server: Server) -> None:
    server.send_bytes(frame({"jsonrpc": "2.0", "id": 7.5, "method": "textDocument/hover"}))
    assert server.wait_for([7.5]) == []
    assert error_of(server.answer(7.5))[0] == -32600


def test_nesting_deeper_than_json_can_read_is_answered_under_its_id(server: Server) -> None:
    msg_id = server.new_id()
    depth = 5000
    body = f'{{"jsonrpc":"2.0","id":{msg_id},"method":"x","params":{"[" * depth}{"]" * depth}}}'
    server.send_bytes(frame(body))
    assert server.wait_for([msg_id]) == []
    code, text = error_of(server.answer(msg_id))
    assert code == -32600 and "nested too deeply" in text


def test_a_batch_gets_an_invalid_request_per_element(server: Server) -> None:
    first, second = server.new_id(), server.new_id()
    batch = [{"jsonrpc": "2.0", "id": i, "method": "workspace/executeCommand"} for i in (first, second)]
    server.send_bytes(frame(batch))
    assert server.wait_for([first, second]) == []
    assert error_of(server.answer(first))[0] == error_of(server.answer(second))[0] == -32600


def test_garbage_frames_get_a_parse_error_and_the_stream_goes_on(server: Server) -> None:
    before = len(server.received.null_id_errors)
    server.send_bytes(frame(b"\x00\x01 not json at all"))
    server.send_bytes(frame(b'{"jsonrpc": "2.0", "id": '))  # cut short before its id: nothing to answer under
    after = server.call("workspace/executeCommand", {"command": "nagent.status"})
    assert after is not None and "result" in after
    errors = server.received.null_id_errors[before:]
    assert len(errors) >= 2 and all(e["error"]["code"] == -32700 for e in errors), errors
    assert all("Parse error" in e["error"]["message"] for e in errors)


def test_a_request_cut_short_is_answered_under_its_id(server: Server) -> None:
    msg_id = server.new_id()
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": {"a": 1}}).encode()
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body[:-5])
    assert server.wait_for([msg_id]) == []
    code, text = error_of(server.answer(msg_id))
    assert code == -32700 and "not valid JSON" in text


def test_invalid_utf8_is_a_parse_error_under_the_request_id(server: Server) -> None:
    msg_id = server.new_id()
    body = b'{"jsonrpc":"2.0","id":%d,"method":"textDocument/hover","params":{"x":"\xff"}}' % msg_id
    server.send_bytes(frame(body))
    assert server.wait_for([msg_id]) == []
    code, text = error_of(server.answer(msg_id))
    assert code == -32700 and "UTF-8" in text


def test_a_header_without_content_length_does_not_desynchronise_the_stream(server: Server) -> None:
    lost = server.new_id()
    body = json.dumps(
        {"jsonrpc": "2.0", "id": lost, "method": "workspace/executeCommand", "params": {"command": "nagent.status"}}
    )
    server.send_bytes(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body.encode())
    later = [server.command("nagent.status") for _ in range(3)]
    assert server.wait_for([lost, *later]) == []
    assert all("result" in (server.answer(i) or {}) for i in [lost, *later])


@pytest.mark.parametrize(
    "uri, words",
    [
        ("file:///tmp/a%00b.py", "NUL"),
        ("file:///tmp/\ud800.py", "lone surrogate"),
        ("file:///" + "a" * 10_000, "characters long"),
    ],
)
def test_path_arguments_no_file_system_takes_are_refused_naming_the_field(server: Server, uri: str, words: str) -> None:
    code, text = error_of(
        server.call("workspace/executeCommand", {"command": "nagent.split", "arguments": [{"uri": uri}]})
    )
    assert code == -32602 and "'uri'" in text and words in text, text


def test_a_second_initialize_is_refused(server: Server) -> None:
    code, text = error_of(server.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}}))
    assert code == -32600 and "already initialized" in text


def test_no_model_configured_is_one_clear_line(server: Server) -> None:
    before = len(server.received.log_messages)
    code, text = error_of(
        server.call(
            "workspace/executeCommand",
            {"command": "nagent.edit", "arguments": [{"uri": server.app_uri, "request": "x"}]},
        )
    )
    assert code == -32001 and text.startswith("No model configured") and "\n" not in text
    probe = server.call("workspace/executeCommand", {"command": "nagent.status"})  # everything sent before has arrived
    assert probe is not None
    messages = server.received.log_messages[before:]
    assert all("\n" not in m and "Traceback" not in m for m in messages), messages
    assert "Traceback" not in server.stderr_text()
    assert sum("No model configured" in line for line in server.stderr_text().splitlines()) <= 1


def test_after_shutdown_requests_are_refused_and_exit_ends_the_server(tmp_path: Path, isolated_home: Path) -> None:
    raw = RawServer(tmp_path, server_env(isolated_home, {}), verbose=False).start()
    assert raw.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    assert raw.call("shutdown") is not None
    code, text = error_of(raw.call("textDocument/hover", hover_params("file:///x", 0, 0)))
    assert code == -32600 and "shutting down" in text
    raw.notify("exit")
    assert raw.stop() == 0


def test_over_tcp_junk_is_answered_and_exit_ends_the_server(tmp_path: Path, isolated_home: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "nagent_lsp", "--tcp", "--port", str(port), "-v"]
    process = subprocess.Popen(argv, cwd=tmp_path, env=server_env(isolated_home, {}), stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        for line in iter(process.stderr.readline, b""):  # the server says when it listens
            if b"serving on" in line:
                break
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            init = {"processId": None, "rootUri": None, "capabilities": {}}
            conn.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            conn.sendall(b"junk\r\n" + frame({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover"}))
            conn.sendall(
                b"Content-Type: x\r\n\r\n" + json.dumps({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}).encode()
            )
            conn.sendall(frame({"jsonrpc": "2.0", "method": "exit"}))
            received = b""
            while chunk := conn.recv(65536):
                received += chunk
        bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in received.split(b"Content-Length: ")[1:]]
        by_id = {b.get("id"): b for b in bodies}
        assert by_id[None]["error"]["code"] == -32700
        assert by_id[2]["error"]["code"] == -32602
        assert by_id[3]["result"] is None
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
