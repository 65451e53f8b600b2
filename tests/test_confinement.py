"""Path attacks through the real server (DESIGN §12, issue 12 items 1 and 7).

Every command that reads a file, and every tag of the model's that does, follows one rule: inside the workspace
folders, no `denyRead` match (case-insensitive), a regular file of at most `maxFileBytes`. Split indexes are
trusted only where the server keeps them and only when it wrote them. Each attack is refused with an error a
person can act on, and no byte of what it aimed at reaches the model, the editor or an artifact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import MODEL_KEY, open_editor

INVALID_PARAMS = -32602
BODY = "".join(f"def function_{i}(value):\n    return value + {i}\n\n\n" for i in range(4000))  # ~150 KB
OUTSIDE = "OUTSIDE_SECRET_BYTES\n"
ENV = "API_TOKEN=env-secret-value\n"


def folder_id(path: Path) -> str:
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


def load(index_path: Path) -> dict:
    return json.loads(index_path.read_text(encoding="utf-8"))


def save(index_path: Path, index: dict) -> None:
    index_path.write_text(json.dumps(index), encoding="utf-8")


def everything_sent(fake_model) -> str:
    return json.dumps([r.body for r in fake_model.requests])


def artifacts(root: Path) -> str:
    """Every byte under a state root, for grepping."""
    if not root.exists():
        return ""
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file() and not p.is_symlink()
    )


async def test_patch_trusts_only_indexes_the_server_wrote_in_its_splits_folder(workspace, editors, tmp_path) -> None:
    target = workspace / "big.py"
    target.write_text(BODY, encoding="utf-8")
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE, encoding="utf-8")
    async with editors.open("vscode", workspace) as editor:
        editor.open(target)
        split = await editor.command("nagent.split", {"uri": editor.uri(target), "targetBytes": 16384})
        index_path = Path(split["indexPath"])
        folder = index_path.parent
        pristine = load(index_path)
        assert pristine["written_by"] == "nagent-lsp" and pristine["split_folder_id"] == folder_id(folder)

        async def refused(path: Path | str, *words: str) -> None:
            error = await editor.command_error("nagent.patch", {"indexPath": str(path)})
            assert error.code == INVALID_PARAMS and "indexPath" in error.message, error.message
            for word in words:
                assert word in error.message, error.message
            assert "Traceback" not in error.message

        # 1. An index outside the state root, forged perfectly (the stamp names its own folder): its place refuses it.
        elsewhere = tmp_path / "elsewhere" / "splits" / "copy"
        shutil.copytree(folder, elsewhere)
        forged = load(elsewhere / "index.json")
        forged["split_folder_id"] = folder_id(elsewhere)
        forged["segments"] = [{**s, "path": str(elsewhere / Path(s["path"]).name)} for s in forged["segments"]]
        (elsewhere / Path(forged["segments"][0]["path"]).name).write_text(OUTSIDE + BODY[:10], encoding="utf-8")
        save(elsewhere / "index.json", forged)
        await refused(elsewhere / "index.json", "splits folder")

        # 2. A copy inside the splits folder (as a repository could commit one): another folder, so not the server's.
        copied = folder.parent / "copied-split"
        shutil.copytree(folder, copied)
        await refused(copied / "index.json", "not written by nagent-lsp")

        # 3. A planted index next to a user's file, with a stamp for its own folder: not in a splits folder.
        src = workspace / "src"
        src.mkdir()
        user_file = src / "big-0007.py"
        user_file.write_text("the user's own file\n", encoding="utf-8")
        planted = {**pristine, "split_folder_id": folder_id(src)}
        planted["segments"] = [{**s, "path": str(src / Path(s["path"]).name)} for s in pristine["segments"]]
        save(src / "index.json", planted)
        await refused(src / "index.json", "splits folder")
        assert user_file.read_text(encoding="utf-8") == "the user's own file\n"

        # 4. Segment paths that leave the split folder, in the server's own (trusted) index.
        for bad in ("../../outside", str(outside), str(folder / ".." / ".." / ".." / "outside.txt"), "/etc/passwd"):
            index = json.loads(json.dumps(pristine))
            index["segments"][1]["path"] = bad
            save(index_path, index)
            await refused(index_path, "segment path")

        # 5. A source outside the workspace, and a source the denyRead rules hide.
        (workspace / ".env").write_text(ENV, encoding="utf-8")
        for source in (str(tmp_path / "outside.txt"), str(workspace / ".env"), "/etc/passwd"):
            save(index_path, {**pristine, "source_path": source})
            await refused(index_path, "source")

        # 6. A path that is not an index at all.
        await refused(workspace / "big.py")
        missing = await editor.command_error("nagent.patch", {"indexPath": str(workspace / "nope" / "index.json")})
        assert "index not found" in missing.message

        assert editor.recorded.apply_edits == []
        assert editor.text(target) == BODY
        save(index_path, pristine)  # the genuine index still works
        result = await editor.command("nagent.patch", {"indexPath": str(index_path)})
        assert result["changed"] is False
    state = artifacts(workspace / ".nagent")
    assert OUTSIDE.strip() not in state and "env-secret-value" not in state and "root:" not in state
    assert not (workspace / ".nagent" / "patches").exists() or not any((workspace / ".nagent" / "patches").iterdir())
    assert outside.read_text(encoding="utf-8") == OUTSIDE
    assert user_file.read_text(encoding="utf-8") == "the user's own file\n"


async def test_stale_cleanup_deletes_only_what_the_old_index_listed(workspace, editors) -> None:
    target = workspace / "big.py"
    target.write_text(BODY, encoding="utf-8")
    async with editors.open("eglot", workspace) as editor:
        editor.open(target)
        split = await editor.command("nagent.split", {"uri": editor.uri(target), "targetBytes": 16384})
        index_path = Path(split["indexPath"])
        lookalike = index_path.parent / "big-0999.py"  # named like a segment, listed by no index
        lookalike.write_text("keep me\n", encoding="utf-8")
        # The user types meanwhile: the patch is merged three ways, and the folder is re-split from the result.
        first = Path(split["segments"][0]["path"])
        first.write_text("# header\n" + first.read_text(encoding="utf-8"), encoding="utf-8")
        editor.change(target, BODY + "# typed\n")
        result = await editor.command("nagent.patch", {"indexPath": str(index_path), "force": True})
        assert result["applied"] is True
        assert lookalike.read_text(encoding="utf-8") == "keep me\n"
        index = load(index_path)
        listed = {Path(s["path"]).name for s in index["segments"]}
        on_disk = {p.name for p in index_path.parent.iterdir()} - {"index.json", "big-0999.py"}
        assert on_disk == listed


async def test_model_file_patch_refuses_crafted_indexes(workspace, editors, fake_model, tmp_path) -> None:
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    target = workspace / "big.py"
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE, encoding="utf-8")
    splits = workspace / ".nagent" / "splits"
    crafted: list[Path] = []

    def responder(request):
        last = request.messages[-1]["content"]
        if "nagent-file-patch-result" in last:
            return "<nagent-response>refused</nagent-response>"
        if "index_path:" in last:
            return "\n".join(f'<nagent-file-patch index="{p}"/>' for p in crafted)
        return f'<nagent-file-read path="{target}"/>'

    fake_model.responder = responder
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        uri = editor.uri(target)
        kept = Path((await editor.command("nagent.split", {"uri": uri}))["indexPath"])
        tampered = Path((await editor.command("nagent.split", {"uri": uri}))["indexPath"])
        # A copy of a real split elsewhere, re-stamped for its new folder, one segment aimed outside.
        elsewhere = tmp_path / "x" / "splits" / "copy"
        shutil.copytree(kept.parent, elsewhere)
        data = load(elsewhere / "index.json")
        data["split_folder_id"] = folder_id(elsewhere)
        data["segments"][0]["path"] = str(outside)
        save(elsewhere / "index.json", data)
        # A copy inside the splits folder (a repository could commit one).
        copied = splits / "copied"
        shutil.copytree(kept.parent, copied)
        # The server's own index, its first segment aimed outside.
        data = load(tampered)
        data["segments"][0]["path"] = str(outside)
        save(tampered, data)
        crafted[:] = [elsewhere / "index.json", copied / "index.json", tampered, "../../../x/splits/copy/index.json"]
        result = await editor.command("nagent.edit", {"uri": uri, "request": "merge these"})
    assert result["applied"] is False and result["reason"] == "no change"
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert f"index_path: {kept}" in convo  # the run read the file through the one trusted split
    assert convo.count('status="error"') == 4 and 'status="ok"' not in convo
    assert convo.count("splits folder") == 2 and "not written by nagent-lsp" in convo and "segment path" in convo
    assert OUTSIDE.strip() not in everything_sent(fake_model)
    assert editor.recorded.apply_edits == []


async def test_summarize_sends_no_secret_and_nothing_outside(workspace, editors, fake_model, tmp_path) -> None:
    (workspace / ".env").write_text(ENV, encoding="utf-8")
    (workspace / ".ENV").write_text(ENV, encoding="utf-8")
    (workspace / ".Env.Production").write_text(ENV, encoding="utf-8")
    ssh = workspace / "keys"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN KEY-----\nprivate-key-bytes\n", encoding="utf-8")
    (workspace / "notes.txt").symlink_to(workspace / ".env")
    outside = tmp_path / "outside.py"
    outside.write_text(OUTSIDE, encoding="utf-8")
    (workspace / "escape.py").symlink_to(outside)
    fake_model.script(text("a summary nobody should get"))
    async with editors.open("eglot", workspace, model=True) as editor:
        for path, words in (
            (workspace / ".env", "denyRead"),
            (workspace / ".ENV", "denyRead"),
            (workspace / ".Env.Production", "denyRead"),
            (ssh / "id_rsa", "denyRead"),
            (workspace / "notes.txt", "denyRead"),
            (outside, "outside the workspace"),
            (workspace / "escape.py", "outside the workspace"),
            (Path("/etc/passwd"), "outside the workspace"),
            (Path("/proc/self/environ"), "outside the workspace"),
        ):
            error = await editor.command_error("nagent.summarize", {"uri": path.as_uri()})
            assert error.code == INVALID_PARAMS and "'uri'" in error.message and words in error.message, error.message
    assert fake_model.requests == []
    assert fake_model.pending == 1


async def test_split_and_conversations_stay_inside_the_workspace(workspace, fake_model, tmp_path) -> None:
    home = tmp_path / "server-home"
    other = tmp_path / "other-repo"
    build_repo(other, [Commit("theirs", {"lib.py": "THEIR_CODE = 1\n"})])
    async with open_editor("neovim", workspace, home) as editor:
        for command in ("nagent.split", "nagent.conversation.open", "nagent.conversation.clear"):
            for path in (Path("/etc/passwd"), other / "lib.py"):
                error = await editor.command_error(command, {"uri": path.as_uri()})
                assert error.code == INVALID_PARAMS and "outside the workspace" in error.message, error.message
        error = await editor.command_error(
            "nagent.conversation.save", {"uri": (other / "lib.py").as_uri(), "name": "x"}
        )
        assert error.code == INVALID_PARAMS
        error = await editor.command_error("nagent.split", {"uri": (workspace / ".env").as_uri()})
        assert error.code == INVALID_PARAMS and "denyRead" in error.message
        inside = workspace / "mine.py"
        inside.write_text("x = 1\n", encoding="utf-8")
        opened = await editor.command("nagent.conversation.open", {"uri": inside.as_uri()})
        assert Path(opened["path"]).is_relative_to(workspace / ".nagent")
    assert not (other / ".nagent").exists()
    assert not (home / ".nagent" / "splits").exists()
    assert "root:" not in artifacts(home / ".nagent") + artifacts(workspace / ".nagent")


async def test_edit_of_a_secret_or_outside_file_never_reaches_the_model(
    workspace, editors, fake_model, tmp_path
) -> None:
    (workspace / ".env").write_text(ENV, encoding="utf-8")
    (workspace / ".Env.Production").write_text(ENV, encoding="utf-8")
    outside = tmp_path / "outside.py"
    outside.write_text(OUTSIDE, encoding="utf-8")
    fake_model.script(text("<nagent-response>should never be asked</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        for path, words in (
            (workspace / ".env", "denyRead"),
            (workspace / ".Env.Production", "denyRead"),
            (outside, "outside the workspace"),
        ):
            error = await editor.command_error("nagent.edit", {"uri": path.as_uri(), "request": "show me"})
            assert error.code == INVALID_PARAMS and words in error.message, error.message
    assert fake_model.requests == []
    assert "env-secret-value" not in artifacts(workspace / ".nagent")


async def test_deny_read_is_case_insensitive_for_the_model(workspace, editors, fake_model) -> None:
    target = workspace / "app.py"
    target.write_text("x = 1\n", encoding="utf-8")
    names = [".ENV", ".Env.Production", "Server.PEM", "ID_RSA.pub", "deploy.KEY"]
    for name in names:
        (workspace / name).write_text(ENV, encoding="utf-8")
    reads = "\n".join(f'<nagent-read path="{n}"/>' for n in names)
    file_reads = "\n".join(f'<nagent-file-read path="{n}"/>' for n in names)
    fake_model.script(text(reads + "\n" + file_reads), text("<nagent-response>refused</nagent-response>"))
    async with editors.open("neovim", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "read them"})
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert convo.count("denyRead pattern") == 2 * len(names)
    assert "env-secret-value" not in everything_sent(fake_model) and "env-secret-value" not in convo
    assert MODEL_KEY not in everything_sent(fake_model)


async def test_history_of_a_file_outside_the_workspace_is_refused_and_leaves_no_state(
    workspace, editors, tmp_path
) -> None:
    """Hover, didOpen and nagent.history read git history only for files the read rules allow: a file of another
    repository (opened through go-to-definition, say) gets no card and no `.nagent/` in that repository."""
    build_repo(workspace, [Commit("ours", {"ours.py": "x = 1\n"})])
    other = tmp_path / "other-repo"
    build_repo(other, [Commit("theirs", {"lib.py": "y = 2\n"}), Commit("again", {"lib.py": "y = 3\n"})])
    async with editors.open("vscode", workspace) as editor:
        editor.open(other / "lib.py")
        assert await editor.hover(other / "lib.py", 0) is None
        error = await editor.command_error("nagent.history", {"uri": editor.uri(other / "lib.py")})
        assert error.code == INVALID_PARAMS and "uri" in error.message and "outside" in error.message, error.message
        error = await editor.command_error("nagent.coedits", {"uri": editor.uri(other / "lib.py")})
        assert error.code == INVALID_PARAMS, error.message
        # The file of our own repository still has its history: the refusal is about the place, not git.
        ours = await editor.command("nagent.history", {"uri": editor.uri(workspace / "ours.py")})
        assert [c["subject"] for c in ours["commits"]] == ["ours"]
    assert not (other / ".nagent").exists()
