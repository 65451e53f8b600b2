"""Change sets and review (DESIGN §9) through the protocol: one applyEdit for every file a run changes, the
co-edited file's conversation, proposals and `nagent.review.*`, the zero-plugin diagnostics and code actions,
writeScope/denyWrite refusals, outsideSelection."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
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
        assert "--- /dev/null\n+++ b/pkg/new_mod.py\n" in patch and "--- a/app.py\n+++ b/app.py\n" in patch
        convo = await conversation_of(editor, workspace / "test_app.py")
        assert "<nagent-change-result" in convo and "test sub too" in convo and "+def test_sub():" in convo
        assert Path(result["conversation"]["path"]).name in convo
        created = await conversation_of(editor, workspace / "pkg" / "new_mod.py")
        assert (
            'created="true"' in created and "--- /dev/null\n+++ b/pkg/new_mod.py\n@@ -0,0 +1 @@\n+VALUE = 1" in created
        )


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
        # The next request on the file tells the model what the user refused.
        fake_model.script(DONE)
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "again"})
        sent = json.dumps(fake_model.chat_requests[-1].messages)
        assert "nagent-review-result" in sent and "Rejected by the user: h1" in sent and "# sum" in sent


# How each editor says no to an applyEdit: VS Code answers applied=false with no reason, Neovim a reason of its
# own, eglot 1.9 an error reply "User canceled server edit" (its confirmation prompt's "no").
DECLINED = {"vscode": None, "neovim": "the user declined", "eglot": "User canceled server edit"}


def decline_next(editor) -> None:
    if editor.profile != "eglot":
        editor.reject_edits, editor.reject_reason = 1, DECLINED[editor.profile]
        return

    def refuse(params) -> None:
        editor.before_apply = None
        raise RuntimeError(DECLINED["eglot"])  # the client answers the applyEdit request with an error

    editor.before_apply = refuse


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_a_users_no_is_never_sent_again(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("app.py", NEW_APP) + write("test_app.py", NEW_TEST)), DONE)
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        decline_next(editor)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
        assert result["applied"] is False and len(editor.recorded.apply_edits) == 1, result
        if DECLINED[profile]:
            assert DECLINED[profile] in result["reason"]
        assert editor.text(target) == APP + "\n" and (workspace / "test_app.py").read_text() == TEST + "\n"
        assert "<nagent-change-result" not in await conversation_of(editor, workspace / "test_app.py")
        # A declined review.apply is not re-sent either, and the proposal stays as it was.
        proposal = await review_run_again(editor, fake_model, target)
        decline_next(editor)
        declined = await editor.command("nagent.review.apply", {"id": proposal["id"]})
        assert declined["applied"] is False and len(editor.recorded.apply_edits) == 2, declined
        listed = await editor.command("nagent.review.list", {})
        assert [sum(f["hunks"] for f in p["files"]) for p in listed["proposals"]] == [3]
        assert "<nagent-review-result" not in await conversation_of(editor, target)


async def review_run_again(editor, fake_model, target: Path) -> dict:
    script_three_files(fake_model)
    result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "test sub", "preview": True})
    assert result["reason"] == "awaiting review", result
    return result["proposal"]


class HeldSecondReply:
    """The model's first reply (the writes) at once, its second held until the test has changed a buffer: the
    user types after the model wrote a file and before the run delivers its change set."""

    def __init__(self, first: str):
        self.first, self.release, self.calls = first, threading.Event(), 0

    def __call__(self, request) -> str | dict:
        self.calls += 1
        if self.calls == 2:
            self.release.wait(60)  # a bound for a test that fails before releasing it
        return self.first if self.calls == 1 else DONE


@pytest.mark.parametrize("profile", ["vscode", "eglot"])
async def test_a_conflict_in_any_file_applies_nothing_and_names_it(profile, workspace, editors, fake_model):
    target = make_repo(workspace)
    test_file = workspace / "test_app.py"
    held = fake_model.responder = HeldSecondReply(write("app.py", NEW_APP) + write("test_app.py", NEW_TEST))
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        editor.open(test_file)
        try:
            _, pending = editor.start_command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
            await asyncio.to_thread(fake_model.wait_for_requests, 2, 60)
            users = (TEST + "\n").replace("assert add(1, 2) == 3", "assert add(2, 2) == 4") + "\n# the user's\n"
            editor.change(test_file, users)
            await editor.command("nagent.status")  # answered after the change above was taken in
        finally:
            held.release.set()
        result = await asyncio.wait_for(pending, 60)
        assert result["applied"] is False and "conflict" in result["reason"] and "test_app.py" in result["reason"]
        assert not editor.recorded.apply_edits
        assert editor.text(target) == APP + "\n" and editor.text(test_file) == users
        assert not (workspace / ".nagent" / "patches").exists()


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_hunks_changed_beyond_merge_are_conflicts_and_never_half_applied(profile, workspace, editors, fake_model):
    target = make_repo(workspace)
    test_file = workspace / "test_app.py"
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        editor.open(test_file)
        proposal = await review_run(editor, fake_model, target)
        ids = {f["uri"]: f["hunks"][0]["id"] for f in proposal["files"]}
        test_hunk = ids[editor.uri(test_file)]
        # The user rewrites the end of the test file, where the proposal adds test_sub.
        users = TEST.replace("assert add(1, 2) == 3", "assert add(1, 2) == 3, 'sum'")
        editor.change(test_file, users)
        only = {"id": proposal["id"], "accept": [test_hunk], "rest": "keep"}
        only = await editor.command("nagent.review.apply", only)
        assert only["applied"] is False and only["conflicts"] == [test_hunk], only
        assert "test_app.py" in only["reason"] and "nothing was applied" in only["reason"]
        assert not editor.recorded.apply_edits and editor.text(test_file) == users
        convo = await conversation_of(editor, target)
        assert f"Not applied, its lines changed since the proposal was made: {test_hunk}" in convo
        assert "def test_sub():" in convo
        # The hunks that still apply apply whole; the conflicting one is no longer pending.
        rest = await editor.command("nagent.review.apply", {"id": proposal["id"]})
        assert rest["applied"] is True and rest["conflicts"] == [] and editor.text(target) == NEW_APP, rest
        new_mod = workspace / "pkg" / "new_mod.py"  # in a buffer where the editor creates files, else on disk
        assert editor.text(test_file) == users
        assert (editor.text(new_mod) if editor.uri(new_mod) in editor.buffers else new_mod.read_text()) == NEW_MOD
        error = await editor.command_error("nagent.review.apply", {"id": proposal["id"], "accept": [test_hunk]})
        assert "already resolved" in str(error)


async def published(editor, uri: str, condition) -> list[types.Diagnostic]:
    """The diagnostics of `uri` once `condition(diagnostics)` holds, waiting for each publishDiagnostics the
    server sends (the state is checked before every wait: no notification is missed)."""
    while not condition(list(editor.client.diagnostics.get(uri) or [])):
        notification = editor.client.protocol.wait_for_notification_async(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        await asyncio.wait_for(notification, 60)
    return list(editor.client.diagnostics[uri])


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_pending_hunks_follow_the_users_typing(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        proposal = await review_run(editor, fake_model, target)
        (diag,) = await published(editor, uri, lambda d: len(d) == 1)
        assert diag.range.start.line == 1
        # Lines added above the hunk: it moves down with its lines.
        editor.change(target, "import math\n# two lines\n" + APP + "\n")
        (diag,) = await published(editor, uri, lambda d: len(d) == 1 and d[0].range.start.line != 1)
        assert (diag.range.start.line, diag.range.end.line) == (3, 4) and "return a + b  # sum" in diag.message
        shown = await editor.command("nagent.review.show", {"id": proposal["id"]})
        (app,) = [f for f in shown["files"] if f["uri"] == uri]
        assert app["hunks"][0]["range"]["start"]["line"] == 3 and app["hunks"][0]["applies"] is True
        # The user rewrites the hunk's own line: it is still shown where it was, saying it no longer applies.
        editor.change(target, "import math\n# two lines\n" + (APP + "\n").replace("return a + b", "return b + a"))
        (diag,) = await published(editor, uri, lambda d: len(d) == 1 and "no longer applies" in d[0].message)
        assert diag.range.start.line == 3 and diag.code == "h1"
        shown = await editor.command("nagent.review.show", {"id": proposal["id"]})
        (app,) = [f for f in shown["files"] if f["uri"] == uri]
        assert app["hunks"][0]["range"]["start"]["line"] == 3 and app["hunks"][0]["applies"] is False
        titles = [a.title for a in await _actions(editor, target, 3)]
        assert any("reject this change" in t for t in titles), titles
        # Typed back: it applies again; resolved: the diagnostics clear.
        editor.change(target, APP + "\n")
        (diag,) = await published(editor, uri, lambda d: len(d) == 1 and "no longer" not in d[0].message)
        assert diag.range.start.line == 1
        await editor.command("nagent.review.discard", {"id": proposal["id"]})
        assert await published(editor, uri, lambda d: not d) == []


async def test_a_created_files_patch_creates_it_with_git_apply(workspace, editors, fake_model, tmp_path) -> None:
    target = make_repo(workspace)
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        proposal = await review_run(editor, fake_model, target)
    patch = workspace / ".nagent" / "proposals" / proposal["id"] / "change.patch"
    assert "--- /dev/null\n+++ b/pkg/new_mod.py\n@@ -0,0 +1 @@\n+VALUE = 1\n" in patch.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=elsewhere, check=True)
    for name in ("app.py", "test_app.py"):
        shutil.copy(workspace / name, elsewhere / name)
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=elsewhere, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    # It creates the file: where one exists already (even empty), git refuses it instead of patching that file.
    (elsewhere / "pkg").mkdir()
    (elsewhere / "pkg" / "new_mod.py").touch()
    exists = subprocess.run(["git", "apply", "--check", str(patch)], cwd=elsewhere, capture_output=True, text=True)
    assert exists.returncode != 0 and "pkg/new_mod.py: already exists" in exists.stderr, exists.stderr
    (elsewhere / "pkg" / "new_mod.py").unlink()
    subprocess.run(["git", "apply", str(patch)], cwd=elsewhere, check=True)
    assert (elsewhere / "pkg" / "new_mod.py").read_text() == NEW_MOD
    assert (elsewhere / "app.py").read_text() == NEW_APP and (elsewhere / "test_app.py").read_text() == NEW_TEST


async def test_proposals_of_a_nested_repository_are_listed(workspace, fake_model, model_env, isolated_home) -> None:
    (workspace / "top.py").write_text("top = 1\n")
    nested = workspace / "vendor" / "lib"
    build_repo(nested, [Commit("lib", {"mod.py": "x = 1\n"})])
    target = nested / "mod.py"
    fake_model.script(text(write("vendor/lib/mod.py", "x = 2\n")), DONE)
    async with open_editor("vscode", workspace, isolated_home, env=model_env) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x", "preview": True})
        proposal = result["proposal"]
        assert (nested / ".nagent" / "proposals" / proposal["id"] / "proposal.json").is_file()
        assert not (workspace / ".nagent" / "proposals").exists()
        listed = await editor.command("nagent.review.list", {})
        assert [p["id"] for p in listed["proposals"]] == [proposal["id"]]
    # After a restart: listed once the server has used the nested repository's state root (a file of it opened).
    async with open_editor("eglot", workspace, isolated_home, env=model_env) as editor:
        uri = editor.open(target)
        assert [d.code for d in await published(editor, uri, lambda d: len(d) == 1)] == ["h1"]
        listed = await editor.command("nagent.review.list", {})
        assert [p["id"] for p in listed["proposals"]] == [proposal["id"]]
        applied = await editor.command("nagent.review.apply", {"id": proposal["id"]})
        assert applied["applied"] is True and editor.text(target) == "x = 2\n"


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
        ({}, "vendor/lib/.git/hooks/pre-commit", "denyWrite"),
        ({}, "vendor/lib/.nagent/config.json", "denyWrite"),
        ({"denyWrite": ["secrets/**"]}, "deploy/secrets/prod.yml", "denyWrite"),
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


FORTY = "".join(f"line{i} = {i}\n" for i in range(1, 41))


async def propose_text(editor, fake_model, target: Path, new_text: str) -> dict:
    fake_model.script(text(write(target.name, new_text)), DONE)
    result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "one line", "preview": True})
    assert result["reason"] == "awaiting review", result
    return result["proposal"]


@pytest.mark.parametrize("profile", ["vscode", "eglot"])
async def test_proposals_on_adjacent_lines_both_apply(profile, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("forty", {"forty.py": FORTY})])
    target = workspace / "forty.py"
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        line20 = await propose_text(editor, fake_model, target, FORTY.replace("line20 = 20", "line20 = 'twenty'"))
        line21 = await propose_text(editor, fake_model, target, FORTY.replace("line21 = 21", "line21 = 'twenty-one'"))
        first = await editor.command("nagent.review.apply", {"id": line20["id"]})
        assert first["applied"] is True and first["conflicts"] == [], first
        shown = await editor.command("nagent.review.show", {"id": line21["id"]})
        assert [h["applies"] for f in shown["files"] for h in f["hunks"]] == [True]
        second = await editor.command("nagent.review.apply", {"id": line21["id"]})
        assert second["applied"] is True and second["conflicts"] == [], second
        both = FORTY.replace("line20 = 20", "line20 = 'twenty'").replace("line21 = 21", "line21 = 'twenty-one'")
        assert editor.text(target) == both
        assert (await editor.command("nagent.review.list", {}))["proposals"] == []


@pytest.mark.parametrize("profile", ["vscode", "eglot"])
async def test_a_review_conflict_says_which_lines_changed(profile, workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("forty", {"forty.py": FORTY})])
    target = workspace / "forty.py"
    async with editors.open(profile, workspace, model=True) as editor:
        editor.open(target)
        proposal = await propose_text(editor, fake_model, target, FORTY.replace("line21 = 21", "line21 = 'model'"))
        (hunk,) = [h["id"] for f in proposal["files"] for h in f["hunks"]]
        users = FORTY.replace("line21 = 21", "line21 = 'the user'")
        editor.change(target, users)
        result = await editor.command("nagent.review.apply", {"id": proposal["id"]})
        assert result["applied"] is False and result["conflicts"] == [hunk], result
        assert (
            f"the lines of {hunk} changed since the proposal was made (another change touched lines 21-21) in forty.py"
            in result["reason"]
        ), result
        assert "while the model worked" not in result["reason"] and "nothing was applied" in result["reason"]
        assert editor.text(target) == users
