"""Start-up stays light (issues 24 and 29): the LSP server answers `initialize` before the edit stack, the model
client, the ACP SDK or MCP are imported — they load at the first request that needs them. A feature module that
imports an operation at its top for a type or an argument class drags ~100 modules into every start.

The CLI's `history` (issue 29) answers from settings, the read rules and git: it loads neither cattrs (settings from
the defaults need no structuring; only `--json` prints through the converter), nor asyncio, the model layer, the
tags parser or the authorship-notes watcher a server runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.harness.gitrepo import Commit, build_repo

SERVER = Path(__file__).resolve().parents[1] / "server"

HEAVY = (
    "nagent_lsp.agent",
    "nagent_lsp.llm",
    "nagent_lsp.operations.edit",
    "nagent_lsp.operations.code_actions",
    "nagent_lsp.operations.attribution",
    "nagent_lsp.acp",
    "nagent_lsp.text.merge",  # the change-set planner and merge3: the first edit loads them (lsp/port.py)
    "merge3",
    "nagent_lsp.store.transaction",
    "openai",
    "acp",
    "mcp",
)


CLI_HISTORY_HEAVY = (
    "cattrs",
    "asyncio",
    "nagent_lsp.llm",
    "nagent_lsp.tags",
    "nagent_lsp.operations.attribution",
    "nagent_lsp.operations.edit",
    "nagent_lsp.lsp",
    "lsprotocol",
    "pygls",
    "openai",
)
# ...and a cold `history FILE` (issue 29: its floor is `--version` plus one `git log`) does without these too
CLI_COLD_HEAVY = (
    "attr",
    "attrs",
    "dataclasses",
    "logging",
    "concurrent.futures",
    "datetime",
    "nagent_lsp.operations",
    "nagent_lsp.config.settings",
    "nagent_lsp.history.service",
)


def _modules_after(statement: str, cwd: Path | None = None, home: Path | None = None) -> list[str]:
    """The modules a fresh interpreter holds after `statement`; printed to stderr's last line (stdout is the
    command's)."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    env = {"PYTHONPATH": str(SERVER), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if home is not None:
        env["HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=cwd)
    return json.loads(done.stderr.strip().splitlines()[-1])


def _among(loaded: list[str], heavy: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if m in heavy or m.startswith(tuple(h + "." for h in heavy))]


def test_the_lsp_server_starts_without_the_edit_stack():
    assert _among(_modules_after("import nagent_lsp.lsp.app"), HEAVY) == [], "imported at start-up"


def test_settings_from_the_defaults_need_no_converter(tmp_path: Path) -> None:
    loaded = _modules_after(
        "from nagent_lsp.config.settings import load_settings\nassert load_settings().settings.history.maxCommits",
        home=tmp_path,
    )
    assert "cattrs" not in loaded


def test_cli_history_loads_only_what_its_answer_needs(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "user"
    home.mkdir()
    build_repo(repo, [Commit("one", {"a.py": "1\n", "b.py": "1\n"}), Commit("two", {"a.py": "2\n"})])
    run = "from nagent_lsp.headless.cli import main\nassert main(['history', 'a.py']) == 0"
    loaded = _modules_after(run, cwd=repo, home=home)
    # the first answer in a repository: the cold path (headless/history_cold.py), not even the settings model
    assert "nagent_lsp.headless.history_cold" in loaded
    assert _among(loaded, (*CLI_HISTORY_HEAVY, *CLI_COLD_HEAVY)) == [], "imported by a cold `nagent-lsp history`"
    # --json prints through the same converter as the wire, and only then loads it
    as_json = _modules_after(run.replace("'a.py']", "'a.py', '--json']"), cwd=repo, home=home)
    assert "cattrs" in as_json and "nagent_lsp.operations.history" in as_json  # the general path, as the server
    assert _among(as_json, CLI_HISTORY_HEAVY[1:]) == [], "imported by `nagent-lsp history --json`"
