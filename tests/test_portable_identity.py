"""Issue 28, the portable identity: a conversation travels with the repository (the committed manifest beside the
per-user local index), follows a rename git made in another clone, a state root from before the manifest is
migrated without losing a conversation, and a stranger's manifest cannot lead the server out of the folder.

Real git (two clones through a bare remote), the real server through the protocol under each client profile, and
the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nagent_lsp.config.settings import load_settings
from nagent_lsp.store.conversation_manifest import ManifestError, parse
from nagent_lsp.store.conversations import ConversationStore
from nagent_lsp.store.root import GITIGNORE, LEGACY
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo, git, git_env
from tests.harness.lsp import Editor, wait_until

CALC = "def add(a, b):\n    return a + b\n"
AUTHOR = git_env({"GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com"})
GUARD = 120.0  # seconds: only keeps a failing CLI run from hanging


def published(tmp_path: Path, files: dict[str, str | bytes | None] | None = None) -> tuple[Path, Path]:
    """Clone A with `calc.py`, pushed to a bare remote: (A, remote)."""
    a, remote = tmp_path / "A", tmp_path / "remote.git"
    build_repo(a, [Commit("calc", files or {"calc.py": CALC})])
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "main")
    return a, remote


def clone(remote: Path, into: Path) -> Path:
    git(into.parent, "clone", "-q", str(remote), str(into))
    return into


def commit_all(repo: Path, message: str, *paths: str) -> None:
    git(repo, "add", *paths)
    git(repo, "commit", "-q", "-m", message, env=AUTHOR)
    git(repo, "push", "-q", "origin", "main")


def manifest(repo: Path) -> dict[str, str]:
    return json.loads((repo / ".nagent" / "conversations" / "manifest.json").read_text())["files"]


def sent(fake_model) -> str:
    """Everything the model received in the last request."""
    return "\n".join(str(m.get("content")) for m in fake_model.chat_requests[-1].messages)


class Runner:
    """One edit request on a file: through the protocol under `profile`, or the CLI (`profile` "cli")."""

    def __init__(self, profile: str, editors, model_env: dict[str, str]):
        self.profile, self.editors, self.model_env = profile, editors, model_env
        self.stack: contextlib.AsyncExitStack | None = None
        self.editor: Editor | None = None
        self.repo: Path | None = None

    async def edit(self, repo: Path, name: str, request: str) -> Path:
        if self.profile == "cli":
            done = subprocess.run(
                [sys.executable, "-m", "nagent_lsp", "edit", name, request],
                cwd=repo,
                env={**os.environ, **self.model_env},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=GUARD,
            )
            assert done.returncode == 0, done.stderr
            found = re.search(r"^conversation: (.+)$", done.stderr, re.M)
            assert found, done.stderr
            return Path(found.group(1))
        if self.repo != repo:  # one editor per clone, kept open across its requests (and its pulls)
            await self.close()
            self.stack = contextlib.AsyncExitStack()
            self.editor = await self.stack.enter_async_context(self.editors.open(self.profile, repo, model=True))
            self.repo = repo
        assert self.editor is not None
        self.editor.open(repo / name)
        result = await self.editor.command("nagent.edit", {"uri": self.editor.uri(repo / name), "request": request})
        return Path(result["conversation"]["path"])

    async def close(self) -> None:
        if self.stack is not None:
            await self.stack.aclose()
        self.stack, self.editor, self.repo = None, None, None


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim", "cli"])
async def test_a_clone_continues_the_conversation_and_follows_a_rename(
    profile, tmp_path, editors, fake_model, model_env
) -> None:
    run = Runner(profile, editors, model_env)
    try:
        await two_clones_and_a_rename(run, tmp_path, fake_model)
    finally:
        await run.close()


async def two_clones_and_a_rename(run: Runner, tmp_path: Path, fake_model) -> None:
    a, remote = published(tmp_path)

    fake_model.script(text("<nagent-response>A-ANSWER: add is typed now</nagent-response>"))
    a_convo = await run.edit(a, "calc.py", "A-REQUEST: type the add function")
    name = a_convo.name
    assert a_convo.parent == a.resolve() / ".nagent" / "conversations" and name.startswith("calc-")
    assert manifest(a) == {"calc.py": name}
    commit_all(a, "keep the conversation", ".nagent")
    # Only what travels is committed: the per-user index, its locks and caches are ignored.
    tracked = set(git(a, "ls-files", ".nagent").split())
    assert {".nagent/.gitignore", ".nagent/conversations/manifest.json", f".nagent/conversations/{name}"} <= tracked
    assert not [p for p in tracked if re.search(r"file-index|\.lock|/cache/|/local/|/proposals/", p)], tracked

    b = clone(remote, tmp_path / "B")
    fake_model.script(text("<nagent-response>B-ANSWER</nagent-response>"))
    b_convo = await run.edit(b, "calc.py", "B-REQUEST: and a docstring")
    assert b_convo == b.resolve() / ".nagent" / "conversations" / name
    received = sent(fake_model)
    assert "A-REQUEST: type the add function" in received and "A-ANSWER: add is typed now" in received
    assert "B-REQUEST" in received

    # A renames the file in a commit; B pulls: the manifest still says calc.py, git's history says calc2.py.
    git(a, "mv", "calc.py", "calc2.py")
    commit_all(a, "rename calc")
    git(b, "pull", "-q", "--ff-only")
    fake_model.script(text("<nagent-response>B-AGAIN</nagent-response>"))
    assert await run.edit(b, "calc2.py", "B-SECOND on the renamed file") == b_convo
    received = sent(fake_model)
    assert "A-REQUEST" in received and "B-REQUEST" in received
    assert manifest(b) == {"calc2.py": name}  # the entry moved with the file: B's next commit carries it

    # A fresh clone has no local index at all: only the manifest (calc.py) and git's renames can find it.
    c = clone(remote, tmp_path / "C")
    fake_model.script(text("<nagent-response>C-ANSWER</nagent-response>"))
    assert await run.edit(c, "calc2.py", "C-REQUEST") == c.resolve() / ".nagent" / "conversations" / name
    received = sent(fake_model)
    assert "A-REQUEST: type the add function" in received and "B-REQUEST" not in received  # B never pushed


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_share_local_keeps_new_conversations_out_of_git(profile, tmp_path, editors) -> None:
    a, _ = published(tmp_path)
    async with editors.open(profile, a, init_options={"conversation": {"share": "local"}}) as editor:
        opened = await editor.command("nagent.conversation.open", {"uri": editor.uri(a / "calc.py")})
    path = Path(opened["path"])
    assert path.parent == a.resolve() / ".nagent" / "conversations" / "local" and path.is_file()
    assert not (a / ".nagent" / "conversations" / "manifest.json").exists()
    git(a, "check-ignore", "-q", str(path))  # raises if git would commit it


def todays_state_root(repo: Path, outside: Path) -> tuple[str, str]:
    """A state root exactly as the server before the manifest left it: the old `.gitignore`, and
    `conversations/file-index.json` keyed by device:inode with absolute paths (one file inside the repository,
    one outside it). Returns (the inside conversation, the outside one)."""
    root = repo / ".nagent"
    (root / "conversations").mkdir(parents=True)
    (root / ".gitignore").write_text(LEGACY)
    inside, elsewhere = "calc-0b8a1f9e-52b4-4a55-9a34-5e2a1f1f0c01", "x-9d7f1f3a-0e0c-4b7e-8f6f-2f0e9c1d2b3a"
    entries = {}
    for path, conversation in ((repo / "calc.py", inside), (outside, elsewhere)):
        st = os.stat(path)
        key = f"{st.st_dev}:{st.st_ino}"
        entries[key] = {"file_id": key, "path": str(path.resolve()), "conversation": conversation}
    (root / "conversations" / "file-index.json").write_text(json.dumps({"by_file_id": entries}, indent=2) + "\n")
    (root / "conversations" / inside).write_text("<user>OLD-TURN: from before the manifest</user>\n")
    (root / "conversations" / elsewhere).write_text("<user>elsewhere</user>\n")
    return inside, elsewhere


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_a_state_root_from_before_the_manifest_is_migrated(profile, tmp_path, editors, fake_model) -> None:
    a, remote = published(tmp_path)
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    inside, elsewhere = todays_state_root(a, outside)
    index_before = json.loads((a / ".nagent" / "conversations" / "file-index.json").read_text())["by_file_id"]

    async with editors.open(profile, a) as editor:
        opened = await editor.command("nagent.conversation.open", {"uri": editor.uri(a / "calc.py")})
    assert Path(opened["path"]) == a.resolve() / ".nagent" / "conversations" / inside
    assert manifest(a) == {"calc.py": inside}  # the outside file is not the repository's to share
    index = json.loads((a / ".nagent" / "conversations" / "file-index.json").read_text())
    assert index["by_file_id"] == index_before and index["manifest_migrated"] == 1  # kept, marked once
    assert (a / ".nagent" / ".gitignore").read_text().startswith(GITIGNORE.splitlines()[0])
    git(a, "check-ignore", "-q", ".nagent/conversations/file-index.json")

    commit_all(a, "share conversations", ".nagent")
    b = clone(remote, tmp_path / "B")
    fake_model.script(text("<nagent-response>continued</nagent-response>"))
    async with editors.open(profile, b, model=True) as editor:
        editor.open(b / "calc.py")
        result = await editor.command("nagent.edit", {"uri": editor.uri(b / "calc.py"), "request": "go on"})
    assert Path(result["conversation"]["path"]).name == inside
    assert "OLD-TURN: from before the manifest" in sent(fake_model)


HOSTILE = {
    "dotdot": {"calc.py": "../../etc/passwd"},
    "absolute-name": {"calc.py": "/etc/passwd"},
    "absolute-path": {"/etc/passwd": "calc-0b8a1f9e-52b4-4a55-9a34-5e2a1f1f0c01"},
}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
async def test_a_hostile_manifest_is_refused_with_a_message(shape, tmp_path, editors) -> None:
    document = json.dumps({"version": 1, "files": HOSTILE[shape]})
    _, remote = published(tmp_path, {"calc.py": CALC, ".nagent/conversations/manifest.json": document})
    ws = clone(remote, tmp_path / "ws")
    async with editors.open("vscode", ws) as editor:
        opened = await editor.command("nagent.conversation.open", {"uri": editor.uri(ws / "calc.py")})
        assert await wait_until(lambda: any("manifest.json" in m.message for m in editor.client.log_messages))
        messages = [m.message for m in editor.client.log_messages if "manifest.json" in m.message]
    path = Path(opened["path"])
    assert path.parent == ws.resolve() / ".nagent" / "conversations" and path.name.startswith("calc-")
    assert len(messages) == 1 and str(ws / ".nagent" / "conversations" / "manifest.json") in messages[0]
    assert (ws / ".nagent" / "conversations" / "manifest.json").read_text() == document  # never written over


async def test_a_manifest_naming_a_committed_link_out_is_not_followed(tmp_path, editors, fake_model) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("OUTSIDE-SECRET\n")
    name = "calc-0b8a1f9e-52b4-4a55-9a34-5e2a1f1f0c01"
    a, remote = published(tmp_path)
    (a / ".nagent" / "conversations").mkdir(parents=True)
    (a / ".nagent" / "conversations" / name).symlink_to(secret)
    (a / ".nagent" / "conversations" / "manifest.json").write_text(
        json.dumps({"version": 1, "files": {"calc.py": name}})
    )
    commit_all(a, "a link out", ".nagent")
    ws = clone(remote, tmp_path / "ws")
    assert (ws / ".nagent" / "conversations" / name).is_symlink()

    fake_model.script(text("<nagent-response>fresh</nagent-response>"))
    async with editors.open("vscode", ws, model=True) as editor:
        editor.open(ws / "calc.py")
        result = await editor.command("nagent.edit", {"uri": editor.uri(ws / "calc.py"), "request": "hello"})
        assert await wait_until(lambda: any("symbolic link" in m.message for m in editor.client.log_messages))
    convo = Path(result["conversation"]["path"])
    assert convo.name != name and not convo.is_symlink() and convo.parent == ws.resolve() / ".nagent" / "conversations"
    assert "OUTSIDE-SECRET" not in sent(fake_model)
    assert secret.read_text() == "OUTSIDE-SECRET\n"
    assert manifest(ws) == {"calc.py": name}  # the stranger's entry is left for the user to see, not replaced


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[]",
        '{"files": {}}',
        '{"version": 2, "files": {}}',
        '{"version": 1, "files": []}',
        '{"version": 1, "files": {}, "hooks": "rm -rf ~"}',
        '{"version": 1, "files": {"a/../../x.py": "x-1"}}',
        '{"version": 1, "files": {".git/config": "x-1"}}',
        '{"version": 1, "files": {"a.py": "saved"}}',
        '{"version": 1, "files": {"a.py": "sub/x-1"}}',
        '{"version": 1, "files": {"a.py": 7}}',
    ],
)
def test_the_manifest_is_parsed_strictly(document: str, tmp_path: Path) -> None:
    where = tmp_path / "manifest.json"
    with pytest.raises(ManifestError, match=re.escape(str(where))):
        parse(document.encode(), where)


def test_a_repository_may_keep_conversations_local_but_not_share_yours(isolated_home: Path, tmp_path: Path) -> None:
    repo_config = tmp_path / "config.json"
    repo_config.write_text('{"conversation": {"share": "local"}}')
    assert load_settings(repo_config=repo_config).settings.conversation.share == "local"
    (isolated_home / ".nagent").mkdir()
    (isolated_home / ".nagent" / "config.json").write_text('{"conversation": {"share": "local"}}')
    repo_config.write_text('{"conversation": {"share": "committed"}}')
    resolved = load_settings(repo_config=repo_config)
    assert resolved.settings.conversation.share == "local"
    assert [p for p in resolved.problems if "conversation.share" in str(p)]


def test_a_well_formed_manifest_is_read(tmp_path: Path) -> None:
    document = '{"version": 1, "files": {"src/calc.py": "calc-1", "README.md": "readme-2.md"}}'
    assert parse(document.encode(), tmp_path / "manifest.json") == {"src/calc.py": "calc-1", "README.md": "readme-2.md"}


@pytest.mark.parametrize("link", [".nagent", ".nagent/conversations"])
async def test_a_committed_link_for_the_state_folders_is_not_written_through(link, tmp_path, editors) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    a, remote = published(tmp_path)
    (a / link).parent.mkdir(parents=True, exist_ok=True)
    (a / link).symlink_to(outside, target_is_directory=True)
    commit_all(a, "a folder link out", link)
    ws = clone(remote, tmp_path / "ws")
    assert (ws / link).is_symlink()
    async with editors.open("vscode", ws) as editor:
        error = await editor.command_error("nagent.conversation.open", {"uri": editor.uri(ws / "calc.py")})
    assert "a link in the repository; conversations are not written through it" in str(error)
    assert [p.name for p in outside.rglob("*") if p.is_file()] == []


def test_renames_on_this_machine_move_the_manifest_entry(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_repo(repo, [Commit("init", {"calc.py": CALC, "lib/util.py": "u = 1\n"})])
    store = ConversationStore(repo / ".nagent", repository=repo)
    calc, util = store.resolve(repo / "calc.py"), store.resolve(repo / "lib" / "util.py")
    assert manifest(repo) == {"calc.py": calc.conversation, "lib/util.py": util.conversation}
    os.rename(repo / "calc.py", repo / "calc2.py")  # same inode: found by the local index, the manifest follows
    assert store.resolve(repo / "calc2.py").conversation == calc.conversation
    os.rename(repo / "lib", repo / "src")  # a folder, as workspace/didRenameFiles reports it
    store.rename(repo / "lib", repo / "src")
    assert manifest(repo) == {"calc2.py": calc.conversation, "src/util.py": util.conversation}
