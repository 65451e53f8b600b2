"""Exact attribution from proposal to commit (issue 27): the ledger, hover and `nagent.attribution.at`, Git AI v3.0.0
authorship logs under refs/notes/ai written for new commits (amend, a commit made with no server running), other
tools' logs read back, and `nagent-lsp blame` — through the real server in the three client profiles and the CLI.

The note is read by `read_authorship_log` below, written from the standard's text (not from our writer)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, add_commit, build_repo, git, git_env
from tests.harness.lsp import open_editor, server_env

ORIGINAL = [f"value_{i} = {i}" for i in range(1, 11)]
WRITTEN = ["def fetch(url):", "    for attempt in range(3):", "        return get(url)", "    raise TimeoutError(url)"]
NEW = ORIGINAL[:2] + WRITTEN + ORIGINAL[2:]  # nagent's lines are 3-6 (1-based)
REQUEST = "make retries idempotent"
USER_NAME, USER_EMAIL = "Alice Example", "alice@example.com"  # the harness commits as Alice
DONE = text("<nagent-response>done</nagent-response>")


def body(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def script_write(fake_model) -> None:
    fake_model.script(text(f'<nagent-write path="calc.py">\n{body(NEW)}</nagent-write>'), DONE)


def make_repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("start", {"calc.py": body(ORIGINAL)})])
    git(workspace, "config", "user.name", USER_NAME)
    git(workspace, "config", "user.email", USER_EMAIL)
    return workspace / "calc.py"


# -- a reader of the standard, from its text ----------------------------------------------------------------------

SESSION = re.compile(r"^s_[0-9a-f]{14}::t_[0-9a-f]{14}$")
HUMAN = re.compile(r"^h_[0-9a-f]{14}$")
LEGACY = re.compile(r"^[0-9a-f]{16}$")


def read_authorship_log(note: str) -> tuple[dict[str, dict[str, list[int]]], dict]:
    """({file: {key: [1-based lines]}}, metadata). Strict: the `---` divider, two-space entries, ascending ranges."""
    attestations, divider, metadata = note.partition("\n---\n")
    assert divider, note
    files: dict[str, dict[str, list[int]]] = {}
    current = None
    for line in attestations.splitlines():
        if not line.startswith(" "):
            current = json.loads(line) if line.startswith('"') else line
            files[current] = {}
            continue
        assert line.startswith("  ") and not line.startswith("   "), line
        key, ranges = line[2:].split(" ")
        assert SESSION.match(key) or HUMAN.match(key) or LEGACY.match(key), key
        lines: list[int] = []
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            lines += range(int(a), int(b or a) + 1)
        assert lines == sorted(set(lines)), ranges
        assert current is not None
        files[current][key] = lines
    meta = json.loads(metadata)
    assert meta["schema_version"] == "authorship/3.0.0" and isinstance(meta["prompts"], dict)
    assert isinstance(meta["base_commit_sha"], str)
    return files, meta


def ai_note(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "notes", "--ref", "ai", "show", rev)


def check_note(repo: Path, conversation: str, lines: list[int]) -> None:
    note = ai_note(repo)
    files, meta = read_authorship_log(note)
    assert list(files) == ["calc.py"]
    [(key, attested)] = files["calc.py"].items()
    assert attested == lines
    sid = "s_" + hashlib.sha256(f"nagent:{conversation}".encode()).hexdigest()[:14]
    assert SESSION.match(key) and key.startswith(sid + "::t_")
    assert meta["base_commit_sha"] == git(repo, "rev-parse", "HEAD").strip()
    session = meta["sessions"][sid]
    assert session["agent_id"] == {"tool": "nagent", "id": conversation, "model": "fake-model"}
    assert session["human_author"] == f"{USER_NAME} <{USER_EMAIL}>"
    assert REQUEST not in note and "messages" not in note  # never conversation text


def hover_text(hover) -> str:
    return hover.contents.value if hover is not None else ""


# -- through the server ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_applied_lines_followed_to_the_commit_note(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    script_write(fake_model)
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": REQUEST})
        assert result["applied"] is True, result
        conversation = Path(result["conversation"]["path"]).name
        edited = list(NEW)
        edited[3] = "    for attempt in range(5):"  # the user rewrites one of nagent's lines
        edited.insert(0, "# a line above shifts every line below")
        editor.change(target, body(edited))

        at = (await editor.command("nagent.attribution.at", {"uri": uri, "line": 3}))["attribution"]
        assert at["source"] == "nagent" and at["turn"] == 1 and at["model"] == "fake-model", at
        assert at["request"] == REQUEST and "turn 1 of calc.py's conversation" in at["message"]
        convo_lines = Path(at["conversationPath"]).read_text(encoding="utf-8").splitlines()
        assert convo_lines[at["conversationLine"]].startswith("<user-prompt")
        assert REQUEST in convo_lines[at["conversationLine"] + 1]
        assert (await editor.command("nagent.attribution.at", {"uri": uri, "line": 4}))["attribution"] is None

        card = hover_text(await editor.hover(target, 3))
        assert "written by nagent: turn 1 of calc.py's conversation — 'make retries idempotent'" in card
        link = re.search(r"command:nagent\.openAttribution\?([^)]+)\)", card)
        assert link is not None, card
        assert json.loads(urllib.parse.unquote(link.group(1))) == {"uri": uri, "line": 3}
        assert at["conversationPath"] in card  # zero-plugin clients get the path
        assert "written by nagent" not in hover_text(await editor.hover(target, 4))

        del edited[0]
        target.write_text(body(edited), encoding="utf-8")  # saved without the extra line, and committed
        add_commit(workspace, Commit("use fetch", {"calc.py": body(edited)}))
        await editor.command("nagent.attribution.at", {"uri": uri, "line": 2})
        check_note(workspace, conversation, [3, 5, 6])


async def test_hover_blames_the_committed_line_through_unsaved_edits(workspace, editors) -> None:
    """Issue 25 item 7: lines inserted above in the buffer do not shift "last changed" onto another commit."""
    build_repo(
        workspace,
        [
            Commit("one", {"a.py": "first = 1\nsecond = 2\n"}),
            Commit("two", {"a.py": "first = 1\nsecond = 2\nthird = 3\n"}, author="Bob", email="bob@example.com"),
        ],
    )
    target = workspace / "a.py"
    async with editors.open("vscode", workspace) as editor:
        editor.open(target)
        editor.change(target, "new_a = 0\nnew_b = 0\nfirst = 1\nsecond = 2\nthird = 3\n")
        card = ""
        for _ in range(200):  # the blame runs in the background: hover until the line says which commit
            card = hover_text(await editor.hover(target, 4))
            if "last changed" in card:
                break
        assert "**Line 5** last changed" in card and "Bob" in card, card
        assert "not committed yet" in hover_text(await editor.hover(target, 0))


async def test_amend_gets_a_note_of_its_own(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    script_write(fake_model)
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": REQUEST})
        conversation = Path(result["conversation"]["path"]).name
        target.write_text(body(NEW), encoding="utf-8")
        first = add_commit(workspace, Commit("use fetch", {"calc.py": body(NEW)}))
        await editor.command("nagent.attribution.at", {"uri": uri, "line": 0})
        check_note(workspace, conversation, [3, 4, 5, 6])
        amended = list(NEW)
        amended[4] = "        return get(url, timeout=5)"
        target.write_text(body(amended), encoding="utf-8")
        git(workspace, "commit", "-q", "--amend", "-a", "-m", "use fetch, with a timeout")
        assert git(workspace, "rev-parse", "HEAD").strip() != first
        await editor.command("nagent.attribution.at", {"uri": uri, "line": 0})
        check_note(workspace, conversation, [3, 4, 6])


async def test_a_commit_made_while_no_server_ran_is_noted_at_restart(
    workspace, fake_model, model_env, isolated_home
) -> None:
    target = make_repo(workspace)
    home = isolated_home
    script_write(fake_model)
    async with open_editor("neovim", workspace, home, env=model_env) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": REQUEST})
        assert result["applied"] is True
        conversation = Path(result["conversation"]["path"]).name
    target.write_text(body(NEW), encoding="utf-8")
    add_commit(workspace, Commit("use fetch", {"calc.py": body(NEW)}))
    async with open_editor("neovim", workspace, home, env=model_env) as editor:
        editor.open(target)
        at = (await editor.command("nagent.attribution.at", {"uri": uri, "line": 2}))["attribution"]
        assert at["source"] == "nagent"
    check_note(workspace, conversation, [3, 4, 5, 6])


# -- another tool's log, in the standard's own example format -------------------------------------------------------

FOREIGN = """src/main.rs
  s_c9883b05a2487d::t_9f8e7d6c5b4a32 1-2
  s_c9883b05a2487d::t_a1b2c3d4e5f678 4
  h_31dce776f88375 3
src/lib.rs
  s_e7f2a90b31cc48::t_deadbeef012345 1-2
src/old.rs
  abcd1234abcd1234 1
---
{
  "schema_version": "authorship/3.0.0",
  "git_ai_version": "1.4.5",
  "base_commit_sha": "7734793b756b3921c88db5375a8c156e9532447b",
  "prompts": {
    "abcd1234abcd1234": {
      "agent_id": {"tool": "cursor", "id": "legacy-1", "model": "gpt-4"},
      "human_author": "dev@example.com",
      "total_additions": 1,
      "accepted_lines": 1,
      "overriden_lines": 0
    }
  },
  "humans": {"h_31dce776f88375": {"author": "Developer <dev@example.com>"}},
  "sessions": {
    "s_c9883b05a2487d": {
      "agent_id": {"tool": "cursor", "id": "6ef2299e", "model": "claude-sonnet-4-5-20250514"},
      "human_author": "dev@example.com"
    },
    "s_e7f2a90b31cc48": {
      "agent_id": {"tool": "claude", "id": "conv_abc123def456", "model": "claude-sonnet-4-5-20250514"},
      "human_author": "dev@example.com",
      "custom_attributes": {"team": "backend"}
    }
  }
}
"""


def foreign_repo(tmp_path: Path, workspace: Path) -> None:
    """A repository whose commit carries another tool's log, pushed to a bare remote and cloned as the workspace."""
    origin = tmp_path / "origin"
    build_repo(
        origin,
        [
            Commit("rust", {"src/main.rs": "fn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\n"}),
            Commit("lib", {"src/lib.rs": "pub fn x() {}\npub fn y() {}\n", "src/old.rs": "old\n"}),
        ],
    )
    git(origin, "config", "user.name", "Dev")
    git(origin, "config", "user.email", "dev@example.com")
    git(origin, "notes", "--ref", "ai", "add", "-m", FOREIGN, "HEAD")
    git(origin, "notes", "--ref", "ai", "add", "-m", FOREIGN.replace("src/lib.rs\n", "src/none.rs\n"), "HEAD~1")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(remote))
    git(origin, "push", "-q", str(remote), "refs/notes/ai:refs/notes/ai")
    workspace.rmdir()
    git(tmp_path, "clone", "-q", str(remote), str(workspace))
    git(workspace, "fetch", "-q", "origin", "refs/notes/ai:refs/notes/ai")


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_another_tools_log_shows_in_hover(profile, tmp_path, workspace, editors) -> None:
    foreign_repo(tmp_path, workspace)
    async with editors.open(profile, workspace) as editor:
        lib, main, old = workspace / "src/lib.rs", workspace / "src/main.rs", workspace / "src/old.rs"
        editor.open(lib)
        editor.open(main)
        editor.open(old)
        card = ""
        for _ in range(200):  # the line's blame runs in the background; the card names the log once it is known
            card = hover_text(await editor.hover(lib, 1))
            if "last changed" in card:
                break
        assert "written by claude, model claude-sonnet-4-5-20250514, session s\\_e7f2a90b31cc48" in card, card
        at = (await editor.command("nagent.attribution.at", {"uri": editor.uri(main), "line": 3}))["attribution"]
        assert at["source"] == "notes" and at["tool"] == "cursor" and at["sessionId"] == "s_c9883b05a2487d"
        human = (await editor.command("nagent.attribution.at", {"uri": editor.uri(main), "line": 2}))["attribution"]
        assert human["source"] == "notes" and "Developer <dev@example.com>" in human["message"]
        legacy = (await editor.command("nagent.attribution.at", {"uri": editor.uri(old), "line": 0}))["attribution"]
        assert legacy["tool"] == "cursor" and legacy["model"] == "gpt-4", legacy


# -- the CLI -----------------------------------------------------------------------------------------------------


def cli(folder: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=folder,
        env=server_env(home, {**git_env(), **(env or {})}),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_cli_edit_commit_blame_and_push(tmp_path, workspace, fake_model, model_env, isolated_home) -> None:
    target = make_repo(workspace)
    script_write(fake_model)
    done = cli(workspace, isolated_home, "edit", "calc.py", REQUEST, env=model_env)
    assert done.returncode == 0, done.stderr
    edited = list(NEW)
    edited[5] = "    raise ConnectionError(url)"
    add_commit(workspace, Commit("use fetch", {"calc.py": body(edited)}))
    blamed = cli(workspace, isolated_home, "blame", "calc.py")
    assert blamed.returncode == 0, blamed.stderr
    rows = blamed.stdout.splitlines()
    assert len(rows) == len(edited)
    assert [n for n, row in enumerate(rows, 1) if "nagent turn 1" in row] == [3, 4, 5]
    assert "commit" in rows[5] and "Alice Example" in rows[5] and "raise ConnectionError" in rows[5]
    as_json = json.loads(cli(workspace, isolated_home, "blame", "calc.py", "--json").stdout)
    assert as_json[2]["attribution"]["request"] == REQUEST
    conversation = Path(as_json[2]["attribution"]["conversationPath"]).name
    check_note(workspace, conversation, [3, 4, 5])
    assert target.exists()

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(workspace, "remote", "add", "origin", str(remote))
    pushed = cli(workspace, isolated_home, "attribution", "push")
    assert pushed.returncode == 0 and "pushed" in pushed.stdout, pushed.stderr
    head = git(workspace, "rev-parse", "HEAD").strip()
    assert git(remote, "notes", "--ref", "ai", "show", head) == ai_note(workspace)
    git(workspace, "push", "-q", "origin", "main")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(clone))
    fetched = cli(clone, isolated_home, "attribution", "fetch")
    assert fetched.returncode == 0 and "1 authorship logs" in fetched.stdout, fetched.stderr
    assert ai_note(clone) == ai_note(workspace)


def test_cli_blame_shows_another_tools_session(tmp_path, workspace, isolated_home) -> None:
    foreign_repo(tmp_path, workspace)
    blamed = cli(workspace, isolated_home, "blame", "src/lib.rs")
    assert blamed.returncode == 0, blamed.stderr
    rows = blamed.stdout.splitlines()
    assert "claude claude-sonnet-4-5-20250514 s_e7f2a90b31cc48" in rows[0] and "pub fn x" in rows[0]


def test_notes_off_writes_none(workspace, fake_model, model_env, isolated_home) -> None:
    make_repo(workspace)
    (workspace / ".nagent").mkdir(exist_ok=True)
    (isolated_home / ".nagent" / "config.json").write_text(
        json.dumps({"history": {"summarize": False}, "attribution": {"notes": "off"}}), encoding="utf-8"
    )
    script_write(fake_model)
    assert cli(workspace, isolated_home, "edit", "calc.py", REQUEST, env=model_env).returncode == 0
    add_commit(workspace, Commit("use fetch", {"calc.py": body(NEW)}))
    blamed = cli(workspace, isolated_home, "blame", "calc.py")
    assert "nagent turn 1" in blamed.stdout  # the ledger still answers
    with pytest.raises(subprocess.CalledProcessError):
        ai_note(workspace)


async def test_reviewed_change_is_attributed_and_a_saved_rewrite_is_overridden(workspace, editors, fake_model) -> None:
    from lsprotocol import types

    target = make_repo(workspace)
    script_write(fake_model)
    async with editors.open("eglot", workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": REQUEST, "preview": True})
        assert result["reason"] == "awaiting review"
        before = (await editor.command("nagent.attribution.at", {"uri": uri, "line": 2}))["attribution"]
        assert before["source"] == "git" and before["commit"] == git(workspace, "rev-parse", "HEAD").strip()
        applied = await editor.command("nagent.review.apply", {"id": result["proposal"]["id"]})
        assert applied["applied"] is True, applied
        at = (await editor.command("nagent.attribution.at", {"uri": uri, "line": 2}))["attribution"]
        assert at["source"] == "nagent" and at["model"] == "fake-model" and at["turn"] == 1, at
        edited = list(NEW)
        edited[2] = "def fetch(url, retries=3):"
        editor.change(target, body(edited))
        target.write_text(body(edited), encoding="utf-8")
        editor.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
        ledger = workspace / ".nagent" / "attribution" / "ledger.jsonl"

        def overridden() -> list[dict]:
            records = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]
            return [r for r in records if r["type"] == "override"]

        from tests.harness.lsp import wait_until

        assert await wait_until(lambda: overridden(), timeout=60)
        assert [r["count"] for r in overridden()] == [1]
        assert (await editor.command("nagent.attribution.at", {"uri": uri, "line": 2}))["attribution"] is None
        beyond = await editor.command("nagent.attribution.at", {"uri": uri, "line": 999})
        assert beyond["attribution"] is None
        error = await editor.command_error("nagent.attribution.at", {"uri": uri, "line": -1})
        assert "line" in str(error)


async def test_rebase_gets_notes_for_the_rebased_commits(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    script_write(fake_model)
    async with editors.open("vscode", workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": REQUEST})
        conversation = Path(result["conversation"]["path"]).name
        target.write_text(body(NEW), encoding="utf-8")
        old = add_commit(workspace, Commit("use fetch", {"calc.py": body(NEW)}))
        await editor.command("nagent.attribution.at", {"uri": uri, "line": 0})
        git(workspace, "checkout", "-q", "-b", "upstream", "HEAD~1")
        add_commit(workspace, Commit("other work", {"other.py": "x = 1\n"}))
        git(workspace, "checkout", "-q", "main")
        git(workspace, "rebase", "-q", "upstream")
        assert git(workspace, "rev-parse", "HEAD").strip() != old
        await editor.command("nagent.attribution.at", {"uri": uri, "line": 0})
        check_note(workspace, conversation, [3, 4, 5, 6])
        with pytest.raises(subprocess.CalledProcessError):
            ai_note(workspace, "upstream")  # the commit that does not hold nagent's lines gets no log


def test_a_teammates_commit_gets_no_log(workspace, fake_model, model_env, isolated_home) -> None:
    make_repo(workspace)
    script_write(fake_model)
    assert cli(workspace, isolated_home, "edit", "calc.py", REQUEST, env=model_env).returncode == 0
    add_commit(workspace, Commit("theirs", {"calc.py": body(NEW)}, author="Bob", email="bob@example.com"))
    assert "nagent turn 1" in cli(workspace, isolated_home, "blame", "calc.py").stdout
    with pytest.raises(subprocess.CalledProcessError):
        ai_note(workspace)
