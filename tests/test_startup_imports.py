"""Start-up stays light (issues 24 and 29): the LSP server answers `initialize` before the edit stack, the model
client, the ACP SDK or MCP are imported — they load at the first request that needs them. A feature module that
imports an operation at its top for a type or an argument class drags ~100 modules into every start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server"

HEAVY = (
    "nagent_lsp.agent",
    "nagent_lsp.llm",
    "nagent_lsp.operations.edit",
    "nagent_lsp.operations.code_actions",
    "nagent_lsp.operations.attribution",
    "nagent_lsp.acp",
    "openai",
    "acp",
    "mcp",
)


def _modules_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SERVER)}
    )
    return json.loads(done.stdout)


def test_the_lsp_server_starts_without_the_edit_stack():
    loaded = _modules_after("import nagent_lsp.lsp.app")
    heavy = [m for m in loaded if m.startswith(HEAVY) and (m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))]
    assert heavy == [], f"imported at start-up: {heavy}"
