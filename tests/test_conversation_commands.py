"""Conversation commands and file identity through the protocol: open, list, clear, save/load, renames."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types

from nagent_lsp.store.root import GITIGNORE
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo


def repo(workspace: Path) -> Path:
    build_repo(workspace, [Commit("init", {"a.py": "a = 1\n", "b.py": "b = 2\n"})])
    return workspace / "a.py"


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_open_shows_when_supported_and_always_returns_path(profile, workspace, editors) -> None:
    target = repo(workspace)
    async with editors.open(profile, workspace) as editor:
        result = await editor.command("nagent.conversation.open", {"uri": editor.uri(target)})
        path = Path(result["path"])
        assert path.parent == workspace.resolve() / ".nagent" / "conversations"
        assert path.name.startswith("a-")
        if profile == "eglot":
            # Not advertised: never asked, so a client that answers null cannot hang us.
            assert result["shown"] is False and not editor.recorded.show_documents
        else:
            assert result["shown"] is True
            assert editor.recorded.show_documents[0].uri == path.as_uri()
        again = await editor.command("nagent.conversation.open", {"uri": editor.uri(target)})
        assert again["path"] == result["path"]
        listed = await editor.command("nagent.conversation.list")
        assert [f["path"] for f in listed["files"]] == [str(target.resolve())]
        assert listed["files"][0]["fileId"] == f"{os.stat(target).st_dev}:{os.stat(target).st_ino}"
    index = (workspace / ".nagent" / "conversations" / "file-index.json").read_text()
    assert '"by_file_id"' in index
    assert (workspace / ".nagent" / ".gitignore").read_text() == GITIGNORE


async def test_clear_archives_and_save_load(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(text("<nagent-response>first answer</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        edited = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "remember me"})
        convo = Path(edited["conversation"]["path"])
        saved = await editor.command("nagent.conversation.save", {"uri": editor.uri(target), "name": "keep"})
        assert "remember me" in Path(saved["path"]).read_text()
        cleared = await editor.command("nagent.conversation.clear", {"uri": editor.uri(target)})
        archived = Path(cleared["archivedPath"])
        assert "remember me" in archived.read_text() and archived.parent == convo.parent
        assert "remember me" not in (convo.read_text() if convo.exists() else "")
        await editor.command("nagent.conversation.load", {"uri": editor.uri(target), "name": "keep"})
        assert "remember me" in convo.read_text()
        error = await editor.command_error("nagent.conversation.load", {"uri": editor.uri(target), "name": "missing"})
        assert "missing" in error.message
        bad = await editor.command_error("nagent.conversation.clear", {})
        assert bad.code == -32602 and "uri" in bad.message


async def test_rename_and_save_by_replace_keep_the_conversation(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(*(text(f"<nagent-response>answer {i}</nagent-response>") for i in range(3)))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        first = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "first"})
        convo = first["conversation"]["path"]

        # The editor renames the file (same inode) and tells the server.
        renamed = workspace / "renamed.py"
        os.rename(target, renamed)
        editor.client.workspace_did_rename_files(
            types.RenameFilesParams(
                files=[types.FileRename(old_uri=editor.uri(target), new_uri=renamed.resolve().as_uri())]
            )
        )
        editor.open(renamed)
        second = await editor.command("nagent.edit", {"uri": editor.uri(renamed), "request": "second"})
        assert second["conversation"]["path"] == convo
        listed = await editor.command("nagent.conversation.list")
        assert [f["path"] for f in listed["files"]] == [str(renamed.resolve())]

        # An editor that saves by writing a new file and renaming it over the old one changes the inode.
        old_id = second["conversation"]["fileId"]
        tmp = workspace / ".renamed.py.tmp"
        tmp.write_text(renamed.read_text())
        os.replace(tmp, renamed)
        third = await editor.command("nagent.edit", {"uri": editor.uri(renamed), "request": "third"})
        assert third["conversation"]["path"] == convo
        assert third["conversation"]["fileId"] != old_id
    text_ = Path(convo).read_text()
    assert text_.index("first") < text_.index("second") < text_.index("third")


async def test_summarize_and_compact(workspace, editors, fake_model) -> None:
    target = repo(workspace)
    fake_model.script(
        text("<nagent-response>first answer " + "lorem ipsum " * 400 + "</nagent-response>"),
        text("Goal: tidy a.py. Nothing changed yet."),
        text("COMPACT SUMMARY: tidy a.py, keep tabs."),
        text("<nagent-response>after compact</nagent-response>"),
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        edited = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "tidy please"})
        convo = Path(edited["conversation"]["path"])
        summary = await editor.command("nagent.conversation.summarize", {"uri": editor.uri(target)})
        assert summary["summary"] == "Goal: tidy a.py. Nothing changed yet."
        assert "tidy please" in fake_model.chat_requests[1].messages[-1]["content"]
        before = convo.read_text()
        compacted = await editor.command(
            "nagent.conversation.compact", {"uri": editor.uri(target), "instruction": "mention tabs"}
        )
        assert Path(compacted["archivedPath"]).read_text() == before
        assert compacted["tokensAfter"] < compacted["tokensBefore"]
        assert "mention tabs" in fake_model.chat_requests[2].messages[0]["content"]
        now = convo.read_text()
        assert "COMPACT SUMMARY" in now and "tidy please" not in now.split("</initial_context>")[1]
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "next"})
        assert "COMPACT SUMMARY" in str(fake_model.chat_requests[3].messages)


async def test_summarize_needs_a_model(workspace, editors) -> None:
    target = repo(workspace)
    async with editors.open("eglot", workspace) as editor:
        error = await editor.command_error("nagent.conversation.summarize", {"uri": editor.uri(target)})
        assert "OPENAI_API_KEY" in error.message
