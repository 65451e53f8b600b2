"""Issue 26 through the protocol and the CLI: completeness hints for an untouched partner (none for a touched one
or a weak one), the Hint diagnostics and code actions, and the warning on a hunk over a recent fix's lines. Real
git repositories built in tmp; the model is the fake OpenAI server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lsprotocol import types

from nagent_lsp.history.coupling import FileEvidence, naming_pair, predict, stem
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.test_changeset import published
from tests.test_cli import cli
from tests.test_code_actions import command_of

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
FIXED = CALC.replace("return a + b", "return int(a) + int(b)")
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
DONE = text("<nagent-response>done</nagent-response>")
HOUR = 3600


def make_repo(workspace: Path, *, fix: bool = False) -> Path:
    """calc.py changed 6 times, always with tests/test_calc.py (a strong partner), twice — the oldest — with
    notes.txt (a weak one: 2 of 6, long ago). `fix`: the last commit fixes `add`'s line."""
    now = int(time.time())
    commits = [
        Commit("start", {"calc.py": CALC, "tests/test_calc.py": TEST, "notes.txt": "n0\n"}, date=now - 90 * HOUR),
        Commit(
            "sub",
            {"calc.py": CALC + "#1\n", "tests/test_calc.py": TEST + "#1\n", "notes.txt": "n1\n"},
            date=now - 80 * HOUR,
        ),
    ]
    for i in range(2, 6):
        commits.append(
            Commit(
                f"step {i}",
                {"calc.py": CALC + f"#{i}\n", "tests/test_calc.py": TEST + f"#{i}\n"},
                date=now - (70 - i) * HOUR,
            )
        )
    if fix:
        commits.append(Commit("Fix overflow in add", {"calc.py": FIXED + "#5\n"}, date=now - 2 * 86400 + HOUR))
    build_repo(workspace, commits)
    return workspace / "calc.py"


def write(path: str, body: str) -> str:
    return f'<nagent-write path="{path}">\n{body}</nagent-write>'


def hint_for(result: dict, partner: str) -> list[dict]:
    return [h for h in result.get("coupling") or [] if h["partner"] == partner]


# -- the predictor on its own -------------------------------------------------------------------------------------


def test_naming_pairs() -> None:
    assert naming_pair("calc.py", "tests/test_calc.py") and naming_pair("refs.c", "refs.h")
    assert naming_pair("builtin/branch.c", "t/t3200-branch.sh") and naming_pair("src/calc.ts", "src/calc.test.ts")
    assert not naming_pair("calc.py", "calc.py") and not naming_pair("calc.py", "parse.py")
    assert stem("Documentation/git-log.adoc") == "log"


def test_predict_strong_untouched_partner_only() -> None:
    commits = [frozenset({"t.py", "n.txt"})] * 2 + [frozenset({"t.py"})] * 4
    evidence = [FileEvidence("c.py", commits[::-1], {"t.py": 1})]
    hints = predict(["c.py"], evidence, min_rate=0.45, min_commits=2)
    assert [(h.partner, h.commits, h.total) for h in hints] == [("t.py", 6, 6)]
    assert predict(["c.py", "t.py"], evidence, min_rate=0.45, min_commits=2) == []  # touched: no hint


# -- through the protocol -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_hint_for_an_untouched_partner(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(text(write("calc.py", CALC.replace("a - b", "a - b  # minus"))), DONE)
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "comment sub"})
        assert result["applied"] is True, result
        (hint,) = hint_for(result, "tests/test_calc.py")
        assert hint["uri"] == uri and hint["partnerUri"] == editor.uri(workspace / "tests" / "test_calc.py")
        assert (hint["commits"], hint["total"]) == (6, 6) and hint["rate"] == 1.0
        assert hint["message"].startswith("calc.py usually changes with tests/test_calc.py (100%, 6 of 6 commits")
        assert hint["message"].endswith("not touched")
        assert hint_for(result, "notes.txt") == []  # a weak partner: 2 of 6 commits, long ago
        diagnostics = await published(editor, uri, lambda ds: any(d.code == "nagent.coupling" for d in ds))
        (shown,) = [d for d in diagnostics if d.code == "nagent.coupling"]
        assert shown.severity == types.DiagnosticSeverity.Hint and shown.source == "nagent"
        assert shown.message == hint["message"] and shown.range.start.line == hint["line"]
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=types.Range(shown.range.start, shown.range.start),
            context=types.CodeActionContext(diagnostics=[shown]),
        )
        actions = await editor.client.text_document_code_action_async(params)
        by_title = {a.title: command_of(a) for a in actions or []}
        command, arguments = by_title["nagent: include tests/test_calc.py"]
        assert command == "nagent.edit" and arguments[0]["uri"] == uri
        assert arguments[0]["request"].startswith("comment sub") and arguments[0]["request"].endswith(
            "@tests/test_calc.py"
        )
        command, arguments = by_title["nagent: open tests/test_calc.py's conversation"]
        assert command == "nagent.conversation.open" and arguments == [{"uri": hint["partnerUri"]}]
        # The include action runs: the partner is read in as a mention, the run touches it, no hint is left.
        fake_model.script(text(write("tests/test_calc.py", TEST + "# sub\n")), DONE)
        again = await editor.command("nagent.edit", *by_title["nagent: include tests/test_calc.py"][1])
        assert again["mentions"] == [{"path": "tests/test_calc.py", "included": True}], again
        assert "coupling" not in again
        await published(editor, uri, lambda ds: not any(d.code == "nagent.coupling" for d in ds))


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_no_hint_for_a_touched_partner(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace)
    fake_model.script(
        text(write("calc.py", CALC.replace("a - b", "a - b  # minus")) + write("tests/test_calc.py", TEST + "# sub\n")),
        DONE,
    )
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "comment sub and its test"})
        assert result["applied"] is True, result
        assert "coupling" not in result  # the partner is in the change set; notes.txt is too weak
        assert not [d for d in editor.client.diagnostics.get(uri) or [] if d.code == "nagent.coupling"]


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_fix_warning_on_a_hunk_over_a_recent_fix(profile, workspace, editors, fake_model) -> None:
    target = make_repo(workspace, fix=True)
    changed = (FIXED + "#5\n").replace("return int(a) + int(b)", "return a + b")
    fake_model.script(text(write("calc.py", changed)), DONE)
    async with editors.open(profile, workspace, model=True) as editor:
        uri = editor.open(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "simplify add", "preview": True})
        (warning,) = result["historyWarnings"]
        assert warning["uri"] == uri and warning["line"] == 1
        assert "'Fix overflow in add' (Alice Example, 1 day ago)" in warning["message"]
        assert warning["message"].startswith("changes lines from ")
        shown = await editor.command("nagent.review.show", {"id": result["proposal"]["id"]})
        (file,) = shown["files"]
        (hunk,) = file["hunks"]
        assert hunk["warnings"] == [warning["message"]]
        diagnostics = await published(editor, uri, lambda ds: any(d.code == "nagent.recentFix" for d in ds))
        assert [d.message for d in diagnostics if d.code == "nagent.recentFix"] == [warning["message"]]
        assert any(d.code != "nagent.recentFix" for d in diagnostics)  # the pending hunk is still shown beside it


# -- the CLI ------------------------------------------------------------------------------------------------------


def test_cli_prints_the_hint(workspace: Path, fake_model, model_env) -> None:
    make_repo(workspace)
    fake_model.script(text(write("calc.py", CALC.replace("a - b", "a - b  # minus"))), DONE)
    out = cli("edit", "calc.py", "comment sub", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    hints = [line for line in out.stderr.splitlines() if line.startswith("hint: ")]
    assert hints == [
        "hint: calc.py usually changes with tests/test_calc.py (100%, 6 of 6 commits, 3 of its last 3); not touched"
    ]


def test_cli_no_hint_when_the_partner_is_touched(workspace: Path, fake_model, model_env) -> None:
    make_repo(workspace)
    fake_model.script(
        text(write("calc.py", CALC.replace("a - b", "a - b  # minus")) + write("tests/test_calc.py", TEST + "# sub\n")),
        DONE,
    )
    out = cli("edit", "calc.py", "comment sub and its test", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    assert "hint: " not in out.stderr and "tests/test_calc.py" in (workspace / "tests" / "test_calc.py").as_posix()
