"""Code actions for editors without a nagent plugin (issue 15): "edit selection" only for clients that can supply a
request (`experimental.nagent.requestInput`), and visible results (showMessage / logMessage / showDocument) for
history, split and an instruction."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, wait_until
from tests.test_code_actions import SOURCE, actions, command_of


def with_plugin(caps: types.ClientCapabilities) -> None:
    caps.experimental = {"nagent": {"requestInput": True}}


def by_title(found, prefix: str):
    return next(a for a in found if a.title.startswith(prefix))


def shown_messages(editor, since: int = 0) -> list[str]:
    return [m.message for m in editor.client.messages[since:]]


def logged(editor) -> str:
    return "\n".join(m.message for m in editor.client.log_messages)


async def test_edit_selection_only_for_clients_that_supply_a_request(workspace, isolated_home) -> None:
    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    for patch, offered in ((None, False), (with_plugin, True)):
        async with open_editor("neovim", workspace, isolated_home, patch_capabilities=patch) as editor:
            uri = editor.open(target)
            titles = [a.title for a in await actions(editor, uri, 3, 5)]
            assert ("nagent: edit selection" in titles) is offered, titles
            # a plugin gets the plain commands (it shows results itself)
            name, _ = command_of(by_title(await actions(editor, uri, 3, 5), "nagent: show this file's history"))
            assert name == ("nagent.history" if offered else "nagent.codeAction.run")


async def test_history_and_split_actions_show_their_result(workspace, editors) -> None:
    build_repo(
        workspace,
        [
            Commit("Add the fetcher", {"net.py": SOURCE}),
            Commit(
                "Retry on errors", {"net.py": SOURCE + "\n# retries\n"}, author="Bob Example", email="bob@example.com"
            ),
        ],
    )
    target = workspace / "net.py"
    async with editors.open("vscode", workspace) as editor:
        uri = editor.open(target)
        since = len(editor.client.messages)
        name, arguments = command_of(by_title(await actions(editor, uri, 0), "nagent: show this file's history"))
        result = await editor.command(name, *arguments)
        assert len(result["commits"]) == 2  # the command's own result comes back unchanged
        assert await wait_until(lambda: shown_messages(editor, since))
        message = shown_messages(editor, since)[-1]
        assert "net.py: 2 commits by 2 authors" in message and "Retry on errors" in message, message
        assert "\n" not in message
        assert await wait_until(lambda: "Alice Example" in logged(editor))

        since, documents = len(editor.client.messages), len(editor.recorded.show_documents)
        name, arguments = command_of(by_title(await actions(editor, uri, 0), "nagent: split this file"))
        wrapped = arguments[0]
        result = await editor.command(name, {**wrapped, "argument": {**wrapped["argument"], "targetBytes": 40}})
        assert len(result["segments"]) > 1
        assert await wait_until(lambda: shown_messages(editor, since))
        assert f"split into {len(result['segments'])} segments" in shown_messages(editor, since)[-1]
        shown = editor.recorded.show_documents[documents:]
        assert [Path(str(uri_to_path(d.uri))).name for d in shown] == [Path(result["segments"][0]["path"]).name]


async def test_instruction_action_shows_the_answer(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    answer = "Added retries.\nThey back off exponentially.\nThree attempts.\nThen the error.\nLine five.\nLine six."
    fake_model.script(
        text(
            f'<nagent-write path="{target}">\n{SOURCE.replace("return get(url)", "return get(url)  # retried")}'
            "</nagent-write>"
        ),
        text(f"<nagent-response>{answer}</nagent-response>"),
    )
    async with editors.open("eglot", workspace, model=True) as editor:
        uri = editor.open(target)
        since = len(editor.client.messages)
        name, arguments = command_of(by_title(await actions(editor, uri, 4), "nagent: apply this instruction"))
        assert name == "nagent.codeAction.run"
        result = await editor.command(name, *arguments)
        assert result == {"started": True, "command": "nagent.instruction.apply"}  # answered at once (issue 25)
        assert await wait_until(lambda: any("Added retries" in m for m in shown_messages(editor, since)))
        assert "# retried" in editor.text(target)  # the change arrived as workspace/applyEdit
        messages = shown_messages(editor, since)
        assert any("working on net.py" in m for m in messages), messages  # eglot 1.9 has no $/progress
        final = next(m for m in messages if "Added retries" in m)
        assert "net.py: applied 1 edit" in final and "tokens" in final and "\n" not in final  # the server's line
        assert await wait_until(lambda: "Then the error." in logged(editor))
        assert editor.recorded.show_documents == []  # eglot cannot show a document: never asked


async def test_failed_action_says_why(workspace, editors) -> None:
    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    async with editors.open("eglot", workspace) as editor:  # no model configured
        uri = editor.open(target)
        since = len(editor.client.messages)
        name, arguments = command_of(by_title(await actions(editor, uri, 4), "nagent: apply this instruction"))
        started = await editor.command(name, *arguments)  # a run answers at once; its failure is shown
        assert started["started"] is True
        assert await wait_until(lambda: any(m.type == types.MessageType.Error for m in editor.client.messages[since:]))
        shown = next(m for m in editor.client.messages[since:] if m.type == types.MessageType.Error)
        assert "model" in shown.message and "OPENAI_API_KEY" in shown.message, shown.message


async def test_a_run_answers_before_the_model_does(profile, workspace, editors, fake_model) -> None:
    """Issue 25 item 4: eglot runs executeCommand synchronously and gives up after 10 s (Emacs frozen meanwhile):
    `nagent.codeAction.run` answers while the model is still thinking, and the change and the answer follow."""
    import asyncio
    import threading

    build_repo(workspace, [Commit("init", {"net.py": SOURCE})])
    target = workspace / "net.py"
    release = threading.Event()
    replies = iter(
        [
            f'<nagent-write path="{target}">\n{SOURCE.replace("return get(url)", "return get(url)  # held")}'
            "</nagent-write>",
            "<nagent-response>Held, then done.</nagent-response>",
        ]
    )

    def held(request) -> dict:
        release.wait(120)  # a bound for a test that fails before releasing it
        return text(next(replies))

    fake_model.responder = held
    try:
        async with editors.open(profile, workspace, model=True) as editor:
            uri = editor.open(target)
            since = len(editor.client.messages)
            name, arguments = command_of(by_title(await actions(editor, uri, 4), "nagent: apply this instruction"))
            result = await asyncio.wait_for(editor.command(name, *arguments), 60)
            assert not release.is_set() and result["started"] is True  # answered while the model was held
            release.set()
            assert await wait_until(lambda: any("Held, then done." in m for m in shown_messages(editor, since)))
            assert "# held" in editor.text(target)
    finally:
        release.set()
