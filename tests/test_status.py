"""The server starts as each editor would start it and answers `nagent.status` per the contract."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from nagent_lsp import __version__
from tests.harness.lsp import open_editor

CONTRACT_FIELDS = {"version", "stateRoot", "model", "baseUrl", "modelConfigured", "configSources", "workspaceFolders"}


async def test_status_in_every_editor(profile: str, workspace: Path, isolated_home: Path) -> None:
    async with open_editor(profile, workspace, isolated_home) as editor:
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


async def test_malformed_argument_is_invalid_params_and_server_survives(workspace: Path, isolated_home: Path) -> None:
    async with open_editor("vscode", workspace, isolated_home) as editor:
        error = await editor.command_error("nagent.status", {"bogus": 1})
        assert error.code == -32602
        assert "bogus" in error.message
        error = await editor.command_error("nagent.status", "not an object")
        assert error.code == -32602
        error = await editor.command_error("nagent.status", {}, {})
        assert error.code == -32602
        assert (await editor.command("nagent.status", {}))["version"] == __version__


def test_version_flag() -> None:
    out = subprocess.run([sys.executable, "-m", "nagent_lsp", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"nagent-lsp {__version__}"


def test_tcp_transport(tmp_path) -> None:
    """`--tcp --host --port` serves LSP over a socket."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "nagent_lsp", "--tcp", "--host", "127.0.0.1", "--port", str(port)], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.time() < deadline, "server did not listen"
                time.sleep(0.1)
        with conn:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while b'"result"' not in data:
                chunk = conn.recv(65536)
                assert chunk, "connection closed"
                data += chunk
            reply = json.loads(data.split(b"\r\n\r\n", 1)[1][: int(data.split(b"Content-Length: ")[1].split(b"\r\n")[0])])
            assert "nagent.status" in reply["result"]["capabilities"]["executeCommandProvider"]["commands"]
    finally:
        server.kill()
        server.wait(5)


async def test_failures_are_forwarded_to_the_client_log(workspace: Path, isolated_home: Path) -> None:
    async with open_editor("vscode", workspace, isolated_home) as editor:
        await editor.command_error("nagent.history", {"uri": (workspace / "missing.py").as_uri()})
        for _ in range(50):
            if editor.client.log_messages:
                break
            await asyncio.sleep(0.05)
        assert any("nagent.history" in m.message for m in editor.client.log_messages)
