"""Strings no file, log or model can take are InvalidParams naming the field, never an internal error (issue 22):
a lone surrogate (JSON's "\\ud800", which UTF-8 cannot encode) in any string of a command's argument or of LSP
params, a NUL in any command string. Sent as raw JSON, escapes and all, through the real server over stdio; one
server for the module, no model configured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.abuse.rawserver import RawServer, frame, server_env
from tests.harness.gitrepo import Commit, build_repo

pytestmark = pytest.mark.abuse

SURROGATE = "\\ud800"  # as the JSON text carries it: written <S> below
NUL = "\\u0000"  # written <N> below


def escaped(json_text: str) -> str:
    return json_text.replace("<S>", SURROGATE).replace("<N>", NUL)


class Server(RawServer):
    app_uri = ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("strings")
    ws, home = base / "ws", base / "home"
    home.mkdir()
    build_repo(ws, [Commit("add app", {"app.py": "print('hi')\n"})])
    raw = Server(ws, server_env(home, {}), verbose=False)
    raw.start()
    raw.app_uri = (ws / "app.py").as_uri()
    answer = raw.call("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": {}})
    assert answer and "result" in answer, answer
    raw.notify("initialized", {})
    yield raw
    assert raw.stop() == 0


def raw_request(server: Server, method: str, params_json: str) -> dict[str, Any]:
    msg_id = server.new_id()
    body = f'{{"jsonrpc":"2.0","id":{msg_id},"method":"{method}","params":{params_json}}}'
    server.send_bytes(frame(escaped(body)))
    assert server.wait_for([msg_id]) == [], f"{method} unanswered"
    answer = server.answer(msg_id)
    assert answer is not None
    return answer


def run_raw_command(server: Server, name: str, argument_json: str) -> dict[str, Any]:
    return raw_request(server, "workspace/executeCommand", f'{{"command":"{name}","arguments":[{argument_json}]}}')


def invalid_params(answer: dict[str, Any]) -> str:
    assert "error" in answer, f"expected an error, got {answer}"
    assert answer["error"]["code"] == -32602, answer
    return str(answer["error"]["message"])


@pytest.mark.parametrize(
    "name, argument, field, problem",
    [
        ("nagent.history", '{"uri":"file:///tmp/a<S>.py"}', "uri", "lone surrogate"),
        ("nagent.edit", '{"uri":"APP","request":"make it <S> faster"}', "request", "lone surrogate"),
        ("nagent.recipe.run", '{"uri":"APP","recipe":"tidy","request":"x<N>y"}', "request", "NUL"),
        ("nagent.recipe.run", '{"uri":"APP","recipe":"t<S>"}', "recipe", "lone surrogate"),
        ("nagent.conversation.save", '{"uri":"APP","name":"a<S>"}', "name", "lone surrogate"),
        ("nagent.conversation.load", '{"uri":"APP","name":"a<S>"}', "name", "lone surrogate"),
        ("nagent.conversation.load", '{"uri":"APP","name":"a<N>b"}', "name", "NUL"),
        ("nagent.review.discard", '{"id":"p1","hunks":["h1","h<S>"]}', "hunks.1", "lone surrogate"),
        (
            "nagent.edit",
            '{"uri":"APP","request":"x","range":{"start":{"line":"<S>"}}}',
            "range.start.line",
            "lone surrogate",
        ),
        ("nagent.trust", '{"hash":"<S>"}', "hash", "lone surrogate"),
        (
            "nagent.codeAction.run",
            '{"command":"nagent.history","argument":{"uri":"x<S>"}}',
            "argument.uri",
            "lone surrogate",
        ),
    ],
)
def test_a_command_string_that_is_not_text_is_invalid_params_naming_the_field(
    server: Server, name: str, argument: str, field: str, problem: str
) -> None:
    text = invalid_params(run_raw_command(server, name, argument.replace("APP", server.app_uri)))
    assert f"'{field}'" in text and problem in text, text


def test_a_command_name_that_is_not_text_is_invalid_params(server: Server) -> None:
    text = invalid_params(raw_request(server, "workspace/executeCommand", '{"command":"nagent.st<S>"}'))
    assert "command" in text


@pytest.mark.parametrize(
    "method, params",
    [
        ("textDocument/hover", '{"textDocument":{"uri":"file:///tmp/a<S>.py"},"position":{"line":0,"character":0}}'),
        (
            "textDocument/codeAction",
            '{"textDocument":{"uri":"file:///tmp/a<S>.py"},"range":{"start":{"line":0,"character":0},'
            '"end":{"line":0,"character":0}},"context":{"diagnostics":[]}}',
        ),
    ],
)
def test_an_lsp_uri_with_a_lone_surrogate_is_invalid_params_naming_it(server: Server, method: str, params: str) -> None:
    text = invalid_params(raw_request(server, method, params))
    assert "params.textDocument.uri" in text and "lone surrogate" in text, text


def test_a_request_id_with_a_lone_surrogate_is_an_invalid_request(server: Server) -> None:
    server.send_bytes(frame(escaped('{"jsonrpc":"2.0","id":"x<S>","method":"textDocument/hover","params":{}}')))
    assert server.wait_until(lambda r: any(k.startswith("str:") for k in r.answers))
    answer = next(a for k, a in server.received.answers.items() if k.startswith("str:"))
    assert answer["error"]["code"] == -32600 and "lone surrogate" in answer["error"]["message"], answer


def test_the_server_still_answers_after_them(server: Server) -> None:
    # A document with a lone surrogate is refused (logged), and the server goes on as before.
    server.send_bytes(
        frame(
            escaped(
                '{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///tmp/b<S>.py",'
                '"languageId":"python","version":1,"text":"x<S>"}}}'
            )
        )
    )
    answer = server.run_command("nagent.status")
    assert answer is not None and "result" in answer, answer
    assert Path(answer["result"]["stateRoot"]).name == ".nagent"
