"""`nagent-lsp history FILE` in a repository no server has indexed yet (issue 29): it answers from the file's own
`git log` (one more per rename), and on a repository whose file history fits that page the answer is the LSP's
full answer, word for word: same commits across the rename, authors, co-edits and card. Once a server has persisted
the index, the CLI loads it and still answers the same."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, repository_settings

ANN = dict(author="Ann Lee", email="ann@example.com")
BOB = dict(author="Bob Ray", email="bob@example.com")


def cli_history(root: Path, rel: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", "history", rel, *extra],
        cwd=root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_repo(root: Path) -> None:
    build_repo(
        root,
        [
            Commit("start", {"app.py": "a\n", "util.py": "u1\n", "notes.md": "n\n"}, **ANN),
            Commit("app and util", {"app.py": "b\n", "util.py": "u2\n"}, **BOB),
            Commit("move app", renames={"app.py": "src/app.py"}, **ANN),
            Commit("bulk", {"src/app.py": "c\n", **{f"gen/{i}.txt": f"{i}\n" for i in range(4)}}, **BOB),
            Commit("docs", {"notes.md": "n2\n"}, **BOB),
            Commit("app util notes", {"src/app.py": "d\n", "util.py": "u3\n", "notes.md": "n3\n"}, **ANN),
        ],
    )


async def full_answer(root: Path, home: Path, uri: str) -> dict:
    """The server's `nagent.history` once its index is complete (no `partial`)."""
    async with open_editor("vscode", root, home) as editor:
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            result = await editor.command("nagent.history", {"uri": uri})
            if "partial" not in result and list((root / ".nagent" / "cache").glob("history-*.idx")):
                return result
            assert asyncio.get_running_loop().time() < deadline, f"the index never completed: {result}"
            await asyncio.sleep(0.05)


async def test_cold_cli_answer_is_the_servers_full_answer(tmp_path: Path, isolated_home: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    repository_settings(root, {"history": {"maxChangesetFiles": 4}})  # a repository setting the CLI must read too
    cold = cli_history(root, "src/app.py", "--json")
    assert cold.returncode == 0, cold.stderr
    assert not list((root / ".nagent").glob("cache/history-*.idx")), "the cold CLI built an index"
    answer = json.loads(cold.stdout)
    assert [c["path"] for c in answer["commits"]] == ["src/app.py"] * 3 + ["app.py"] * 2  # followed the rename
    assert "partial" not in answer  # the page reached the file's first commit: nothing is missing

    full = await full_answer(root, isolated_home, (root / "src" / "app.py").resolve().as_uri())
    assert answer == full
    # "bulk" touches 5 files, over the repository's cap of 4: no gen/ file is a co-edit, in either answer
    assert [r["path"] for r in answer["coedits"]] == ["util.py", "notes.md"]

    loaded = cli_history(root, "src/app.py", "--json")  # now from the index the server persisted
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == full
    text = cli_history(root, "src/app.py")
    assert text.returncode == 0, text.stderr
    assert "Commits (newest first):" in text.stdout and "move app" in text.stdout and "Bob Ray" in text.stdout


async def test_cold_cli_says_partial_when_the_page_is_cut(tmp_path: Path, isolated_home: Path) -> None:
    """More commits than the first page holds: the cold answer is the newest page and says it is partial, as the
    LSP's answer before its index is ready does; the text says so too."""
    root = tmp_path / "repo"
    build_repo(root, [Commit(f"c{i}", {"f.py": f"{i}\n"}, **(ANN if i % 2 else BOB)) for i in range(55)])
    cold = cli_history(root, "f.py", "--json")
    assert cold.returncode == 0, cold.stderr
    answer = json.loads(cold.stdout)
    assert answer["partial"] is True and len(answer["commits"]) == 50
    assert [c["subject"] for c in answer["commits"][:2]] == ["c54", "c53"]
    text = cli_history(root, "f.py").stdout
    assert text.splitlines()[1] == "Partial: the newest commits only; older commits were not read."
    full = await full_answer(root, isolated_home, (root / "f.py").resolve().as_uri())
    assert len(full["commits"]) == 55 and full["commits"][:50] == answer["commits"]
