"""The server starts as each editor would start it and answers `nagent.status` per the contract."""

from __future__ import annotations

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
