"""A conversation the repository shares keeps a note in place of its initial context (issue 28): that block holds this
clone's absolute paths, the file id and the user's own ~/.nagent/context, and is rebuilt before every request anyway.
The model still receives the whole context; a conversation that stays local keeps it in the file, as before."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.conversation_file import SHARED_CONTEXT_NOTE
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor

CALC = "def add(a, b):\n    return a + b\n"
PERSONAL = "PERSONAL-NOTE: I prefer tabs"
DONE = text("<nagent-response>done</nagent-response>")


async def run_once(workspace: Path, home: Path, fake_model, model_env, options: dict | None = None) -> tuple[str, str]:
    (home / ".nagent").mkdir(parents=True, exist_ok=True)
    (home / ".nagent" / "context.md").write_text(PERSONAL + "\n", encoding="utf-8")
    fake_model.script(DONE)
    async with open_editor("eglot", workspace, home, env=model_env, init_options=options) as editor:
        target = workspace / "calc.py"
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "explain add"})
    system = fake_model.chat_requests[-1].messages[0]["content"]
    return Path(result["conversation"]["path"]).read_text(encoding="utf-8"), system


async def test_a_shared_conversation_keeps_no_machine_paths_or_personal_context(
    workspace, isolated_home, fake_model, model_env
) -> None:
    build_repo(workspace, [Commit("calc", {"calc.py": CALC})])
    stored, system = await run_once(workspace, isolated_home, fake_model, model_env)
    # The model got everything: this clone's paths and the user's own context.
    assert str(workspace) in system and PERSONAL in system
    # The committed file holds the note instead, and the turn itself.
    assert SHARED_CONTEXT_NOTE in stored and "explain add" in stored and "done" in stored
    assert str(workspace) not in stored and PERSONAL not in stored and str(isolated_home) not in stored


async def test_a_local_conversation_keeps_its_context(workspace, isolated_home, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("calc", {"calc.py": CALC})])
    options = {"conversation": {"share": "local"}}
    stored, system = await run_once(workspace, isolated_home, fake_model, model_env, options)
    assert PERSONAL in system and PERSONAL in stored and SHARED_CONTEXT_NOTE not in stored


async def test_blocks_in_other_files_conversations_name_files_relative_to_the_workspace(
    workspace, isolated_home, fake_model, model_env
) -> None:
    build_repo(workspace, [Commit("calc", {"calc.py": CALC, "test_calc.py": "from calc import add\n"})])
    write = '<nagent-write path="test_calc.py">\nfrom calc import add\n\n\nassert add(1, 2) == 3\n</nagent-write>'
    fake_model.script(text(write), DONE)
    async with open_editor("vscode", workspace, isolated_home, env=model_env) as editor:
        target = workspace / "calc.py"
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "test add"})
        assert result["applied"] is True
        other = await editor.command("nagent.conversation.open", {"uri": editor.uri(workspace / "test_calc.py")})
    stored = Path(other["path"]).read_text(encoding="utf-8")
    assert 'target="calc.py"' in stored and "a change to calc.py made in" in stored
    assert str(workspace) not in stored  # nothing of this clone's location in what the repository shares
