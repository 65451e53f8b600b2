"""Issue 25, items 6 and 9: nagent's own files are never an edit target (a conversation opened as a source file ran
the model on the conversation itself), `nagent.conversation.open` on a conversation file opens that conversation,
and a conflict with what the user typed meanwhile keeps the model's change as a proposal instead of dropping it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from tests.harness.gitrepo import Commit, build_repo, git
from tests.test_edit_delivery import BASE, change_while_the_model_thinks

ORIGINAL = "def add(a, b):\n    return a + b\n"


def cloned_repo(tmp_path: Path, workspace: Path) -> Path:
    """A repository whose committed `.nagent/` holds a conversation, a proposal-like file and a split segment,
    pushed to a bare remote and cloned into the workspace, as a stranger's repository arrives."""
    origin = tmp_path / "origin"
    build_repo(
        origin,
        [
            Commit(
                "init",
                {
                    "calc.py": ORIGINAL,
                    ".nagent/conversations/calc-0000.txt": "<user-prompt>\nhi\n</user-prompt>\n",
                    ".nagent/proposals/p1/change.patch": "--- a/calc.py\n+++ b/calc.py\n",
                    ".nagent/splits/calc/seg-001.py": ORIGINAL,
                    "vendor/lib/.nagent/context.md": "nested state root\n",
                },
            )
        ],
    )
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
    workspace.rmdir()
    subprocess.run(["git", "clone", "-q", str(bare), str(workspace)], check=True)
    git(workspace, "config", "user.email", "t@example.com")
    return workspace / "calc.py"


@pytest.mark.parametrize(
    "inside",
    [
        ".nagent/conversations/calc-0000.txt",
        ".nagent/proposals/p1/change.patch",
        ".nagent/splits/calc/seg-001.py",
        "vendor/lib/.nagent/context.md",
    ],
)
async def test_state_root_files_are_no_edit_target(inside, profile, workspace, editors, fake_model, tmp_path):
    cloned_repo(tmp_path, workspace)
    state_file = workspace / inside
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(state_file, state_file.read_text())
        for command, argument in [
            ("nagent.edit", {"uri": uri, "request": "rewrite this"}),
            ("nagent.instruction.apply", {"uri": uri, "line": 0}),
            ("nagent.recipe.run", {"uri": uri, "recipe": "anything"}),
        ]:
            error = await editor.command_error(command, argument)
            assert isinstance(error, JsonRpcInvalidParams), (command, error)
            assert "uri" in error.message and "state root" in error.message and "never an edit target" in error.message
    assert not fake_model.chat_requests  # refused before any model call
    assert not editor.recorded.apply_edits


async def test_open_on_a_conversation_opens_that_conversation(profile, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"calc.py": ORIGINAL})])
    target = workspace / "calc.py"
    async with editors.open(profile, workspace, model=True) as editor:
        opened = await editor.command("nagent.conversation.open", {"uri": editor.uri(target)})
        conversation = Path(opened["path"])
        again = await editor.command("nagent.conversation.open", {"uri": editor.uri(conversation)})
        listed = await editor.command("nagent.conversation.list", {})
    assert again["path"] == opened["path"]  # never "the conversation of the conversation"
    assert [entry["path"] for entry in listed["files"]] == [str(target.resolve())]


async def test_a_conflict_keeps_the_change_as_a_proposal(profile, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"mod.py": BASE})])
    target = workspace / "mod.py"
    model_text = BASE.replace("line 5 = 5", "line 5 = 'model'")
    users = BASE.replace("line 5 = 5", "line 5 = 'user'")
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        result = await change_while_the_model_thinks(editor, fake_model, target, model_text, users)
        assert result["applied"] is False and "conflict" in result["reason"], result
        assert "kept as a proposal" in result["reason"] and result["proposal"]["id"]
        assert editor.text(target) == users and not editor.recorded.apply_edits  # what the user typed wins
        listed = await editor.command("nagent.review.list", {})
        assert [p["id"] for p in listed["proposals"]] == [result["proposal"]["id"]]
        shown = await editor.command("nagent.review.show", {"id": result["proposal"]["id"]})
        (hunk,) = shown["files"][0]["hunks"]
        assert hunk["newText"] == "line 5 = 'model'\n" and hunk["applies"] is False
        assert result["message"].startswith("mod.py: a change awaits review (1 hunk): ")
        # The user takes the model's line back: the kept change applies.
        editor.change(target, BASE)
        applied = await editor.command("nagent.review.apply", {"id": result["proposal"]["id"]})
        assert applied["applied"] is True and editor.text(target) == model_text
    conversation = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert f'proposal="{result["proposal"]["id"]}"' in conversation


async def test_a_repository_conversation_never_becomes_a_target_from_the_cli(workspace, tmp_path) -> None:
    """The CLI refuses the same (`nagent-lsp edit .nagent/conversations/…`), before asking for any model."""
    cloned_repo(tmp_path, workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env.update({"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    run = subprocess.run(
        [sys.executable, "-m", "nagent_lsp", "edit", ".nagent/conversations/calc-0000.txt", "rewrite"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "never an edit target" in run.stderr, run.stderr
