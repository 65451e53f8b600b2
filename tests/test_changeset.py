"""Change sets and review (DESIGN §9) through the protocol: one applyEdit for every file a run changes, the
co-edited file's conversation, proposals and `nagent.review.*`, the zero-plugin diagnostics and code actions,
writeScope/denyWrite refusals, outsideSelection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor, repository_settings, wait_until
from tests.test_code_actions import command_of

APP = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
TEST = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
DONE = text("<nagent-response>done</nagent-response>")


def make_repo(workspace: Path) -> Path:
    build_repo(
        workspace,
        [
            Commit("app", {"app.py": APP, "test_app.py": TEST}),
            Commit("both", {"app.py": APP + "\n", "test_app.py": TEST + "\n"}),
        ],
    )
    return workspace / "app.py"


def write(path: str | Path, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


NEW_APP = (APP + "\n").replace("return a + b", "return a + b  # sum")
NEW_TEST = TEST + "\n" + "\ndef test_sub():\n    assert sub(3, 1) == 2\n"
NEW_MOD = "VALUE = 1\n"


def script_three_files(fake_model) -> None:
    fake_model.script(
        text(write("app.py", NEW_APP) + write("test_app.py", NEW_TEST) + write("pkg/new_mod.py", NEW_MOD)), DONE
    )


async def conversation_of(editor, path: Path) -> str:
    result = await editor.command("nagent.conversation.open", {"uri": editor.uri(path)})
    return Path(result["path"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_change_set_arrives_as_one_apply_edit(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    script_three_files(fake_model)
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "test sub too"})
        assert result["applied"] is True, result
        assert len(editor.recorded.apply_edits) == 1
        edit = editor.recorded.apply_edits[0].edit
        new_uri = editor.uri(workspace / "pkg" / "new_mod.py")
        if profile == "vscode":  # documentChanges with resourceOperations create: CreateFile + its text
            creates = [c for c in edit.document_changes if isinstance(c, types.CreateFile)]
            assert [c.uri for c in creates] == [new_uri]
            edited = {
                c.text_document.uri: c.edits for c in edit.document_changes if isinstance(c, types.TextDocumentEdit)
            }
            assert editor.text(workspace / "pkg" / "new_mod.py") == NEW_MOD
        else:  # eglot (no create) and Neovim 0.10 (no documentChanges): the new file is written to disk by the server
            if edit.document_changes:
                assert not any(isinstance(c, types.CreateFile) for c in edit.document_changes)
                edited = {c.text_document.uri: c.edits for c in edit.document_changes}
            else:
                edited = dict(edit.changes)
            assert (workspace / "pkg" / "new_mod.py").read_text() == NEW_MOD
        assert len(edited[editor.uri(target)]) == 1 and len(edited[editor.uri(workspace / "test_app.py")]) == 1
        assert editor.text(target) == NEW_APP and editor.text(workspace / "test_app.py") == NEW_TEST
        assert (workspace / "test_app.py").read_text() == TEST + "\n"  # an editor buffer, never written behind it
        files = {f["uri"]: f for f in result["files"]}
        assert files[new_uri]["created"] is True and files[editor.uri(target)]["created"] is False
        assert result["edits"] == sum(f["edits"] for f in result["files"])
        patch = Path(result["patchPath"]).read_text()
        assert "app.py" in patch and "test_app.py" in patch and "new_mod.py" in patch
        convo = await conversation_of(editor, workspace / "test_app.py")
        assert "<nagent-change-result" in convo and "test sub too" in convo and "+def test_sub():" in convo
        assert Path(result["conversation"]["path"]).name in convo


async def test_read_of_a_staged_file_answers_its_staged_text(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("pkg/new_mod.py", NEW_MOD)), text('<nagent-read path="pkg/new_mod.py"/>'), DONE)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
    sent = json.dumps(fake_model.chat_requests[-1].messages)
    assert "VALUE = 1" in sent


async def review_run(editor, fake_model, target: Path) -> dict:
    script_three_files(fake_model)
    result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "test sub", "preview": True})
    assert result["applied"] is False and result["reason"] == "awaiting review", result
    assert not editor.recorded.apply_edits
    return result["proposal"]


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_review_applies_only_accepted_hunks_and_records_the_rejected(profile, workspace, editors, fake_model):
    target = make_repo(workspace)
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        proposal = await review_run(editor, fake_model, target)
        hunks = {f["uri"]: [h["id"] for h in f["hunks"]] for f in proposal["files"]}
        assert sorted(sum(hunks.values(), [])) == ["h1", "h2", "h3"]
        listed = await editor.command("nagent.review.list", {})
        assert [p["id"] for p in listed["proposals"]] == [proposal["id"]]
        shown = await editor.command("nagent.review.show", {"id": proposal["id"]})
        assert shown["files"] == proposal["files"]
        app_hunk = hunks[editor.uri(target)][0]
        result = await editor.command("nagent.review.apply", {"id": proposal["id"], "accept": [app_hunk]})
        assert result["applied"] is True and result["conflicts"] == [], result
        assert sorted(result["rejected"]) == sorted(h for h in ["h1", "h2", "h3"] if h != app_hunk)
        assert editor.text(target) == NEW_APP
        assert not (workspace / "pkg" / "new_mod.py").exists()
        assert editor.buffers.get(editor.uri(workspace / "test_app.py")) is None
        convo = await conversation_of(editor, target)
        assert "<nagent-review-result" in convo and "def test_sub():" in convo and "VALUE = 1" in convo
        assert (await editor.command("nagent.review.list", {}))["proposals"] == []
        error = await editor.command_error("nagent.review.apply", {"id": proposal["id"]})
        assert "id" in str(error) and "already resolved" in str(error)


async def test_unknown_ids_are_invalid_params_and_nothing_is_applied(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        proposal = await review_run(editor, fake_model, target)
        for name, argument, field in [
            ("nagent.review.show", {"id": "p20250101T000000Z-00000000"}, "id"),
            ("nagent.review.show", {"id": "../../etc"}, "id"),
            ("nagent.review.apply", {"id": proposal["id"], "accept": ["h1", "h99"]}, "accept"),
            ("nagent.review.discard", {"id": proposal["id"], "hunks": ["zz"]}, "hunks"),
        ]:
            error = await editor.command_error(name, argument)
            assert error.code == -32602 and field in str(error), (name, error)
        assert not editor.recorded.apply_edits
        assert len((await editor.command("nagent.review.list", {}))["proposals"]) == 1


async def test_confirm_edits_keeps_the_change_for_review_and_discard_rejects_all(workspace, editors, fake_model):
    target = make_repo(workspace)
    repository_settings(workspace, {"confirmEdits": True})
    fake_model.script(text(write("app.py", NEW_APP)), DONE)
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "comment"})
        assert result["reason"] == "awaiting review" and not editor.recorded.apply_edits
        assert not editor.recorded.message_requests  # no showMessageRequest, no change annotation
        discarded = await editor.command("nagent.review.discard", {"id": result["proposal"]["id"]})
        assert discarded["rejected"] == ["h1"]
        assert editor.text(target) == APP + "\n"
        assert "return a + b  # sum" in await conversation_of(editor, target)


async def test_a_users_no_is_never_sent_again(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", NEW_APP)), DONE)
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        editor.reject_edits, editor.reject_reason = 1, "User canceled server edit"
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
        assert result["applied"] is False and len(editor.recorded.apply_edits) == 1


async def test_proposal_survives_a_restart(workspace, fake_model, model_env, isolated_home) -> None:
    target = make_repo(workspace)
    async with open_editor("vscode", workspace, isolated_home, env=model_env) as editor:
        editor.open(target)
        proposal = await review_run(editor, fake_model, target)
    folder = workspace / ".nagent" / "proposals" / proposal["id"]
    assert (folder / "proposal.json").is_file() and "new_mod.py" in (folder / "change.patch").read_text()
    async with open_editor("neovim", workspace, isolated_home, env=model_env) as editor:
        editor.open(target)
        await wait_until(lambda: editor.client.diagnostics.get(editor.uri(target)))
        assert [d.code for d in editor.client.diagnostics[editor.uri(target)]] == ["h1"]
        result = await editor.command("nagent.review.apply", {"id": proposal["id"]})
        assert result["applied"] is True and result["rejected"] == [] and len(result["files"]) == 3
        assert editor.text(target) == NEW_APP and (workspace / "pkg" / "new_mod.py").read_text() == NEW_MOD


def _actions(editor, path: Path, line: int):
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(editor.uri(path)),
        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    return editor.client.text_document_code_action_async(params)


async def run_action(editor, action) -> dict:
    name, arguments = command_of(action)
    return await editor.command(name, *arguments)


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_zero_plugin_diagnostics_and_code_actions(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    test_file = workspace / "test_app.py"
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        editor.open(test_file)
        proposal = await review_run(editor, fake_model, target)
        uri, test_uri = editor.uri(target), editor.uri(test_file)
        assert await wait_until(lambda: editor.client.diagnostics.get(uri) and editor.client.diagnostics.get(test_uri))
        (diag,) = editor.client.diagnostics[uri]
        assert diag.source == "nagent" and diag.severity == types.DiagnosticSeverity.Hint and diag.code == "h1"
        assert "return a + b  # sum" in diag.message and diag.range.start.line == 1
        titles = [a.title for a in await _actions(editor, target, 1)]
        for wanted in ["accept this change", "reject this change", "accept all", "reject all"]:
            assert any(wanted in t for t in titles), titles
        # Reject the test file's hunk: the others stay pending.
        (test_diag,) = editor.client.diagnostics[test_uri]
        reject = next(
            a for a in await _actions(editor, test_file, test_diag.range.start.line) if "reject this" in a.title
        )
        result = await run_action(editor, reject)
        assert result["rejected"] == [test_diag.code]
        assert await wait_until(lambda: not editor.client.diagnostics.get(test_uri))
        # Accept the target's hunk through its action.
        accept = next(a for a in await _actions(editor, target, 1) if "accept this" in a.title)
        result = await run_action(editor, accept)
        assert result["applied"] is True and editor.text(target) == NEW_APP
        assert await wait_until(lambda: not editor.client.diagnostics.get(uri), timeout=5), editor.client.diagnostics
        assert editor.text(test_file) == TEST + "\n"
        # The new file's hunk is still pending; "reject all" resolves the proposal.
        listed = await editor.command("nagent.review.list", {})
        assert [f["hunks"] for f in listed["proposals"][0]["files"]] == [1]
        await editor.command("nagent.review.discard", {"id": proposal["id"]})
        assert (await editor.command("nagent.review.list", {}))["proposals"] == []


@pytest.mark.parametrize(
    "settings, path, reason",
    [
        ({"writeScope": "target"}, "test_app.py", 'writeScope setting is "target"'),
        ({}, ".env.local", "denyWrite"),
        ({}, ".git/config", "denyWrite"),
        ({"denyWrite": ["*.lock"]}, "deps/Poetry.LOCK", "denyWrite"),
        ({}, "../outside.py", "outside the workspace"),
        ({}, ".nagent/config.json", "state folder"),
    ],
)
async def test_write_scope_and_deny_write_refuse(settings, path, reason, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    if settings:
        repository_settings(workspace, settings)
    fake_model.script(text(write(path, "hijacked\n")), DONE)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
    assert result["applied"] is False and result["reason"] == "no change"
    convo = Path(result["conversation"]["path"]).read_text()
    assert 'status="error"' in convo and "write not allowed" in convo and reason in convo
    assert not editor.recorded.apply_edits
    assert not (workspace.parent / "outside.py").exists()


async def test_outside_selection_is_reported(workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", (APP + "\n").replace("a - b", "b - a").replace("a + b", "b + a"))), DONE)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        selection = {"start": {"line": 4, "character": 0}, "end": {"line": 6, "character": 0}}
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "range": selection})
    assert result["applied"] is True
    assert result["outsideSelection"] is True and result["outsideLines"] == [{"uri": editor.uri(target), "lines": [1]}]
