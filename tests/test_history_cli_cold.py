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


# -- the cold path's text is the general path's (headless/history_cold.py) ------------------------------------------

ODD = "data/r\udce9sum\udce9.txt"  # a file name that is not UTF-8 (Latin-1 bytes, as os.fsdecode gives it)
LEAN_NEVER = (
    *("attr", "attrs", "cattrs", "dataclasses", "logging", "concurrent.futures", "datetime", "asyncio"),
    "tempfile",  # git's stderr goes to an O_TMPFILE of its own (history/git.py)
)


def make_busy_repo(root: Path) -> list[str]:
    """A rename, a merge, a co-edited file deleted since, a co-edited file whose name is not UTF-8, a reformat
    listed in .git-blame-ignore-revs, and an author whose name is not ASCII."""
    hashes = build_repo(
        root,
        [
            Commit("start", {"lib/core.py": "a\n", "lib/api.py": "x\n", "old.txt": "o\n", ODD: "r\n"}, **ANN),
            Commit("core and api", {"lib/core.py": "b\n", "lib/api.py": "y\n", ODD: "r2\n"}, **BOB),
            Commit("move core", renames={"lib/core.py": "src/core.py"}, author="Jörg Strauß", email="j@example.com"),
            Commit("side work", {"src/core.py": "side\n", "old.txt": "o2\n"}, branch="side", **ANN),
            Commit("main work", {"README.md": "r\n"}, branch="main", **BOB),
            Commit("merge side", merge="side", **BOB),
            Commit("reformat", {"src/core.py": "fmt\n", "lib/api.py": "fmt\n"}, **ANN),
            Commit("drop old", {"old.txt": None}, **BOB),
            Commit("core api odd", {"src/core.py": "c\n", "lib/api.py": "z\n", ODD: "r3\n"}, **ANN),
        ],
    )
    (root / ".git-blame-ignore-revs").write_text(f"# formatting only\n{hashes[6]}\n", encoding="utf-8")
    return hashes


def lean_imports(root: Path, rel: str) -> set[str]:
    """The modules `nagent-lsp history REL` imports (python -X importtime names each one on stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nagent_lsp", "history", rel],
        cwd=root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def general_text(root: Path, rel: str, *extra: str) -> str:
    """The general path's text for the same question: the repository's config names a history setting at its
    default value, which the cold path leaves to the general path (it does not merge settings); the answer is the
    same, so the two texts must be too."""
    config = root / ".nagent" / "config.json"
    config.parent.mkdir(exist_ok=True)
    config.write_text(json.dumps({"history": {"maxChangesetFiles": 50}}), encoding="utf-8")
    try:
        done = cli_history(root, rel, *extra)
    finally:
        config.unlink()
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cold_text_is_the_general_paths_text(tmp_path: Path, isolated_home: Path) -> None:
    root = tmp_path / "repo"
    make_busy_repo(root)
    for rel, extra in (("src/core.py", ()), ("lib/api.py", ()), (ODD, ()), ("src/core.py", ("--max-commits", "2"))):
        cold = cli_history(root, rel, *extra)
        assert cold.returncode == 0, cold.stderr
        assert cold.stdout == general_text(root, rel, *extra), rel
    text = cli_history(root, "src/core.py").stdout
    assert "move core" in text and "Jörg Strauß" in text and "core and api" in text  # across the rename
    coedits = text.split("Files changed in the same commits:")[1]
    assert "lib/api.py" in coedits and "data/r" in coedits  # the odd name, shown as display() makes it
    assert "old.txt" not in coedits  # deleted since: not a partner to look at
    assert not (root / ".nagent").exists() or not list((root / ".nagent").glob("cache/history-*.idx"))


def test_cold_path_imports_no_settings_model_nor_logging(tmp_path: Path, isolated_home: Path) -> None:
    """The cold answer's import list (issue 29's floor is `--version` plus one `git log`): none of the heavy
    modules the general path needs. A repository setting sends it down the general path, which does import them."""
    root = tmp_path / "repo"
    make_busy_repo(root)
    loaded = lean_imports(root, "src/core.py")
    assert "nagent_lsp.headless.history_cold" in loaded
    assert not loaded & set(LEAN_NEVER), sorted(loaded & set(LEAN_NEVER))
    assert not {m for m in loaded if m.startswith(("nagent_lsp.operations", "nagent_lsp.config.settings"))}
    repository_settings(root, {"history": {"maxCommits": 10}})
    assert {"attrs", "nagent_lsp.operations.history"} <= lean_imports(root, "src/core.py")


def test_cold_path_leaves_refusals_and_errors_to_the_general_path(tmp_path: Path, isolated_home: Path) -> None:
    root = tmp_path / "repo"
    build_repo(root, [Commit("start", {"app.py": "a\n", ".env": "KEY=1\n"}, **ANN)])
    denied = cli_history(root, ".env")
    assert denied.returncode == 2 and "denyRead" in denied.stderr and not denied.stdout
    outside = tmp_path / "loose.py"
    outside.write_text("x\n", encoding="utf-8")
    alone = cli_history(tmp_path, "loose.py")
    assert alone.returncode == 1 and "not inside a git repository" in alone.stderr
    bad = cli_history(root, "app.py", "--max-commits", "0")
    assert bad.returncode == 2 and "maxCommits" in bad.stderr
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    for command in ("history", "coedits"):
        looped = subprocess.run(
            [sys.executable, "-m", "nagent_lsp", command, "loop1"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert looped.returncode == 2 and "loop1 cannot be resolved (symlink loop)" in looped.stderr, looped.stderr
        assert "Traceback" not in looped.stderr
