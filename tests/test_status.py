"""The server starts as each editor would start it and answers `nagent.status` per the contract."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

from nagent_lsp import __version__
from tests.harness.lsp import open_editor, wait_until

CONTRACT_FIELDS = {"version", "stateRoot", "model", "baseUrl", "modelConfigured", "configSources", "workspaceFolders"}


async def test_status_in_every_editor(profile: str, workspace: Path, editors) -> None:
    async with editors.open(profile, workspace) as editor:
        result = await editor.command("nagent.status", {})
        assert CONTRACT_FIELDS <= set(result)
        assert result["version"] == __version__
        assert result["workspaceFolders"] == [str(workspace.resolve())]
        assert result["stateRoot"] == str(workspace.resolve() / ".nagent")
        assert result["modelConfigured"] is False
        assert result["configSources"][0] == "defaults"
        # No argument at all is accepted when every field is optional.
        again = await editor.command("nagent.status")
        assert again["version"] == __version__


async def test_status_advertised_and_key_never_returned(workspace: Path, isolated_home: Path) -> None:
    secret = "sk-test-very-secret-value-123"
    async with open_editor("vscode", workspace, isolated_home, env={"OPENAI_API_KEY": secret}) as editor:
        result = await editor.command("nagent.status", {})
        assert result["modelConfigured"] is True
        assert secret not in json.dumps(result)
        assert all(secret not in m.message for m in editor.client.log_messages)


async def test_malformed_argument_is_invalid_params_and_server_survives(workspace: Path, editors) -> None:
    async with editors.open("vscode", workspace) as editor:
        error = await editor.command_error("nagent.status", {"bogus": 1})
        assert error.code == -32602
        assert "bogus" in error.message
        error = await editor.command_error("nagent.status", "not an object")
        assert error.code == -32602
        error = await editor.command_error("nagent.status", {}, {})
        assert error.code == -32602
        assert (await editor.command("nagent.status", {}))["version"] == __version__


def connect_when_listening(server: subprocess.Popen, port: int) -> socket.socket:
    """Connect once the server listens: retried until it does or exits (a minute is only a hang guard)."""
    exited = threading.Event()
    threading.Thread(target=lambda: (server.wait(), exited.set()), daemon=True).start()
    for _ in range(600):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=60)
        except OSError:
            if exited.wait(0.1):
                raise AssertionError(f"the server exited: {server.stderr.read().decode(errors='replace')}") from None
    raise AssertionError("the server did not listen within a minute")


def test_version_flag() -> None:
    out = subprocess.run([sys.executable, "-m", "nagent_lsp", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"nagent-lsp {__version__}"


def test_tcp_transport(tmp_path) -> None:
    """`--tcp --host --port` serves LSP over a socket."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "nagent_lsp", "--tcp", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        conn = connect_when_listening(server, port)
        with conn:
            params = {"processId": None, "rootUri": None, "capabilities": {}}
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while b'"result"' not in data:
                chunk = conn.recv(65536)
                assert chunk, "connection closed"
                data += chunk
            length = int(data.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            reply = json.loads(data.split(b"\r\n\r\n", 1)[1][:length])
            assert "nagent.status" in reply["result"]["capabilities"]["executeCommandProvider"]["commands"]
    finally:
        server.kill()
        server.wait(5)
        server.stderr.close()


async def test_failures_are_forwarded_to_the_client_log(workspace: Path, editors) -> None:
    async with editors.open("vscode", workspace) as editor:
        await editor.command_error("nagent.history", {"uri": (workspace / "missing.py").as_uri()})
        # The log record may be sent from another thread, after the error reply: wait for it (the bound only
        # keeps a missing message from hanging the suite).
        await wait_until(lambda: any("nagent.history" in m.message for m in editor.client.log_messages))
        assert any("nagent.history" in m.message for m in editor.client.log_messages)
