"""The pygls behaviour lsp/pygls_private.py relies on (docs/pygls-upstream.md): every private name it uses is still
there with the signature it calls, and behaves as it assumes. A pygls release that changes any of it fails here,
naming what changed, before it can fail in an editor; one that fixes the executeCommand leak upstream fails
`test_pygls_still_leaks_a_generator_step`, the sign that the override can go."""

from __future__ import annotations

import asyncio
import inspect
import json
from concurrent.futures import Future
from typing import Any

import pygls
import pytest
from lsprotocol import types
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol, default_converter
from pygls.server import JsonRPCServer

from nagent_lsp.lsp import pygls_private
from nagent_lsp.lsp.pygls_private import PRIVATE_NAMES, ContainedProtocol, request_table
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.lsp.transport import Frame
from nagent_lsp.operations.args import NoArgs

SIGNATURES = {
    "_execute_handler": ["self", "msg_id", "handler", "callback", "args", "kwargs"],
    "_handle_request": ["self", "msg_id", "method_name", "params"],
    "_handle_notification": ["self", "method_name", "params"],
    "_run_generator": ["self", "future", "gen", "result_future"],
    "_send_data": ["self", "data"],
}


class Capture:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.messages.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))
        self.arrived.set()

    def close(self) -> None:
        pass

    async def answer(self, msg_id: Any) -> dict[str, Any]:
        while (found := next((m for m in self.messages if m.get("id") == msg_id and "method" not in m), None)) is None:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 30)
        return found


def test_pygls_is_the_minor_version_pinned() -> None:
    assert pygls.__name__ == "pygls"
    from importlib.metadata import version

    major, minor, *_ = version("pygls").split(".")
    assert (major, minor) == ("2", "1"), f"pygls {version('pygls')}: re-check docs/pygls-upstream.md, then the pin"


@pytest.mark.parametrize("name", PRIVATE_NAMES["JsonRPCProtocol"])
def test_every_private_name_used_exists(name: str) -> None:
    protocol = JsonRPCProtocol(JsonRPCServer(JsonRPCProtocol, default_converter), default_converter())
    assert hasattr(protocol, name), f"pygls no longer has JsonRPCProtocol.{name}"


@pytest.mark.parametrize("name, parameters", sorted(SIGNATURES.items()))
def test_the_private_methods_overridden_or_called_keep_their_signatures(name: str, parameters: list[str]) -> None:
    assert list(inspect.signature(getattr(JsonRPCProtocol, name)).parameters) == parameters


def test_no_other_module_uses_a_private_pygls_name() -> None:
    """Only pygls_private.py names them (a quick guard: every `._name` from PRIVATE_NAMES in lsp/)."""
    from pathlib import Path

    lsp = Path(pygls_private.__file__).parent
    names = PRIVATE_NAMES["JsonRPCProtocol"]
    offenders = [
        f"{path.relative_to(lsp)}: {name}"
        for path in lsp.rglob("*.py")
        if path.name != "pygls_private.py"
        for name in names
        if f".{name}" in path.read_text(encoding="utf-8") or f"def {name}(" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_builtin_features_are_registered_by_method_name_so_ours_replace_pygls() -> None:
    """ContainedProtocol's executeCommand coroutine and shutdown replace pygls' built-ins of the same name."""
    server = NagentServer()
    builtins = server.protocol.fm.builtin_features
    assert inspect.iscoroutinefunction(builtins[types.WORKSPACE_EXECUTE_COMMAND])
    assert builtins[types.WORKSPACE_EXECUTE_COMMAND].__func__ is ContainedProtocol.lsp_workspace__execute_command
    assert builtins[types.SHUTDOWN].__func__ is ContainedProtocol.lsp_shutdown
    assert hasattr(LanguageServerProtocol, "lsp_workspace__execute_command")  # the name pygls registers


async def test_execute_handler_files_a_coroutine_under_its_id_and_calls_back() -> None:
    protocol = JsonRPCProtocol(JsonRPCServer(JsonRPCProtocol, default_converter), default_converter())
    done: list[Future[Any]] = []

    async def handler(value: int) -> int:
        return value + 1

    finished = asyncio.Event()
    protocol._execute_handler("k", handler, callback=lambda f: (done.append(f), finished.set()), args=(41,))
    assert "k" in protocol._request_futures
    await asyncio.wait_for(finished.wait(), 30)
    assert done[0].result() == 42
    assert "k" in protocol._request_futures, "pygls now removes it itself: ContainedProtocol pops it anyway"


async def test_pygls_still_leaks_a_generator_step() -> None:
    """The leak the override fixes (docs/pygls-upstream.md, first item): pygls' own _run_generator files the
    step's task under a fresh id that nobody removes."""
    protocol = JsonRPCProtocol(JsonRPCServer(JsonRPCProtocol, default_converter), default_converter())

    async def inner() -> str:
        return "done"

    def generator() -> Any:
        return (yield inner, (), None)

    result: Future[Any] = Future()
    JsonRPCProtocol._run_generator(protocol, None, gen=generator(), result_future=result)
    await asyncio.wait_for(asyncio.wrap_future(result), 30)
    leaked = [f for f in protocol._request_futures.values() if f.done()]
    assert len(leaked) == 1, "pygls no longer leaks generator steps: drop ContainedProtocol._run_generator"


async def test_the_running_handler_reads_its_request_id_through_msg_id() -> None:
    """`msg_id` (public) reads the contextvar `_handle_request` sets; the command handlers rely on it."""
    server, capture = NagentServer(), Capture()
    server.protocol.set_writer(capture)
    seen: list[Any] = []

    def probe(ls: NagentServer, args: NoArgs) -> dict[str, Any]:
        return {}

    async def record(ls: NagentServer, args: NoArgs) -> dict[str, Any]:
        seen.append(ls.protocol.msg_id)
        return {"ok": True}

    server.commands.add(server, "test.record", NoArgs, record)
    server.commands.add(server, "test.probe", NoArgs, probe)
    send(server, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"processId": None, "capabilities": {}}})
    init = await capture.answer(0)
    assert set(init["result"]["capabilities"]["executeCommandProvider"]["commands"]) == {"test.record", "test.probe"}
    for msg_id in (7, "eight"):
        send(server, command(msg_id, "test.record"))
        assert (await capture.answer(msg_id))["result"] == {"ok": True}
    assert seen == [7, "eight"]
    assert [f for f in request_table(server.protocol).values() if f.done()] == []


async def test_a_running_command_is_cancelled_by_cancel_request_and_leaves_nothing_behind() -> None:
    server, capture = NagentServer(), Capture()
    server.protocol.set_writer(capture)
    started, never = asyncio.Event(), asyncio.Event()

    async def wait_forever(ls: NagentServer, args: NoArgs) -> dict[str, Any]:
        started.set()
        await never.wait()
        return {}

    server.commands.add(server, "test.wait", NoArgs, wait_forever)
    send(server, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"processId": None, "capabilities": {}}})
    await capture.answer(0)
    send(server, command(1, "test.wait"))
    await asyncio.wait_for(started.wait(), 30)
    send(server, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    answer = await capture.answer(1)
    assert answer["error"]["code"] == -32800
    assert request_table(server.protocol) == {}


def command(msg_id: Any, name: str, *arguments: Any) -> dict[str, Any]:
    params = {"command": name, "arguments": list(arguments)}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": params}


def send(server: NagentServer, message: dict[str, Any]) -> None:
    server.nagent_protocol.handle_event(Frame(json.dumps(message).encode()))
