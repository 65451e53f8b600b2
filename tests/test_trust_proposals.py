"""Issue 21, finding 1: a proposal is only believed when this server made it for this user (DESIGN §12).

An attacker commits `.nagent/proposals/<id>/proposal.json` + `pending` to a repository, pushes it to a bare remote,
and the user clones it: pointing at `.git/hooks/pre-commit`, at a file outside the workspace, with its conversation
a `.pth` in a "site-packages", with an enormous path, as broken JSON, with wrong types, with a MAC-looking field.
None is listed, placed as a diagnostic, shown, applied or discarded; one warning names them; nothing is written
anywhere; a proposal this server makes in the same clone still works. A proposal of the server's own that was edited
is refused as well, one whose folder was swapped for a link leading outside is refused when used, and one of its
own that is malformed is one message naming the file and field while the rest of the list still answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nagent_lsp.store import proposals, provenance
from nagent_lsp.store.root import GITIGNORE, LEGACY, ensure_root
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo, git
from tests.harness.lsp import wait_until

INVALID_PARAMS = -32602
APP = "".join(f"v{i} = {i}\n" for i in range(10))
CHANGED = APP.replace("v3 = 3", "v3 = 'three'")
HOOK = "#!/bin/sh\nexit 0\n"
EVIL = "import os; open(os.path.expanduser('~/PWNED'), 'w').write('x')\n"
DONE = text("<nagent-response>done</nagent-response>")
GUARD = 120.0  # seconds: only keeps a failing test from hanging, never asserted
FOREIGN = "this server did not make"


def ids(count: int) -> list[str]:
    return [f"p20250101T0000{n:02d}Z-{n:08x}" for n in range(1, count + 1)]


def a_proposal(proposal_id: str, path: str, conversation: str, *, created: bool = False, new: str = EVIL) -> dict:
    return {
        "version": 1,
        "id": proposal_id,
        "createdAt": "2025-01-01T00:00:00Z",
        "status": "pending",
        "request": EVIL,
        "conversation": {"path": conversation, "fileId": "1:2"},
        "target": path,
        "files": [
            {
                "uri": Path(path).as_uri() if path.startswith("/") else "file:///x",
                "path": path,
                "created": created,
                "baseText": "" if created else HOOK,
                "newText": new,
                "hunks": [
                    {
                        "id": "h1",
                        "start": 0,
                        "end": 0 if created else 2,
                        "oldText": "",
                        "newText": new,
                        "status": "pending",
                    }
                ],
            }
        ],
    }


def attacker_clone(tmp_path: Path, workspace: Path) -> tuple[dict[str, str], Path]:
    """The attacker's repository, pushed to a bare remote and cloned into `workspace` (as the user would); returns
    {proposal id: what it is} and the folder outside the workspace the proposals aim at."""
    outside = tmp_path / "outside"
    (outside / "site-packages").mkdir(parents=True)
    (outside / "victim.txt").write_text("the user's own file\n")
    convo = str(workspace / ".nagent" / "conversations" / "app.py.md")
    first, second, third, fourth, fifth, sixth, seventh = ids(7)
    hook = str(workspace / ".git" / "hooks" / "pre-commit")
    crafted: dict[str, str | bytes] = {
        first: json.dumps(a_proposal(first, hook, convo)),
        second: json.dumps(a_proposal(second, str(outside / "new.py"), convo, created=True)),
        third: json.dumps(a_proposal(third, str(workspace / "app.py"), str(outside / "site-packages" / "evil.pth"))),
        fourth: json.dumps(a_proposal(fourth, "/" + "a" * 200_000, "../../outside/site-packages/evil.pth")),
        fifth: '{"id": "' + fifth + '", "files": [',
        sixth: json.dumps({**a_proposal(sixth, str(workspace / "app.py"), convo), "files": "app.py", "request": 7}),
        # It even looks signed: a MAC-shaped first field (the file is read whole, the MAC does not verify).
        seventh: '{\n "mac": "' + "0" * 64 + '",' + json.dumps(a_proposal(seventh, hook, convo))[1:],
    }
    what = dict(zip(crafted, ["hook", "outside", "pth", "huge", "json", "types", "fake mac"], strict=True))
    files: dict[str, str | bytes | None] = {"app.py": APP}
    for proposal_id, body in crafted.items():
        files[f".nagent/proposals/{proposal_id}/proposal.json"] = body
        files[f".nagent/proposals/{proposal_id}/pending"] = ""
        files[f".nagent/proposals/{proposal_id}/change.patch"] = ""
    source = tmp_path / "attacker"
    build_repo(source, [Commit("a useful project", files)])
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(source, "remote", "add", "origin", str(remote))
    git(source, "push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(workspace))
    pre_commit = workspace / ".git" / "hooks" / "pre-commit"
    pre_commit.write_text(HOOK)
    pre_commit.chmod(0o755)
    return what, outside


def snapshot(workspace: Path, outside: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every file and folder the attack aims at: the work tree and hooks (not git's own bookkeeping, not the state
    the server keeps for itself), the shipped proposals, the folder outside. Path -> (mode, size, mtime, sha256)."""
    seen: dict[str, tuple[int, int, int, str]] = {}
    roots = [outside, workspace / ".git" / "hooks", workspace / ".nagent" / "proposals"]
    for root in roots:
        for path in [root, *root.rglob("*")]:
            seen[str(path)] = _stamp(path)
    for path in workspace.iterdir():
        if path.name not in (".git", ".nagent"):
            seen[str(path)] = _stamp(path)
    return seen


def _stamp(path: Path) -> tuple[int, int, int, str]:
    st = path.lstat()
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
    return (st.st_mode, st.st_size, st.st_mtime_ns, digest)


def nothing_written(before: dict, workspace: Path, outside: Path) -> None:
    after = snapshot(workspace, outside)
    assert after == before
    assert not (outside / "site-packages" / "evil.pth").exists() and not (outside / "new.py").exists()
    assert not list(Path(os.path.expanduser("~")).glob("PWNED"))
    assert (workspace / ".git" / "hooks" / "pre-commit").read_text() == HOOK


def ignored_message(crafted: dict[str, str], workspace: Path) -> str:
    names = ", ".join(sorted(crafted))
    return (
        f"ignored {len(crafted)} proposals {FOREIGN}: {names} "
        f"(in {workspace / '.nagent' / 'proposals'}; left untouched)"
    )


# -- over LSP ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_shipped_proposals_are_never_used_over_lsp(profile, tmp_path, workspace, editors, fake_model) -> None:
    crafted, outside = attacker_clone(tmp_path, workspace)
    before = snapshot(workspace, outside)
    target = workspace / "app.py"
    async with editors.open(profile, workspace, model=True) as editor:
        client = editor.client
        listed = await editor.command("nagent.review.list")
        assert listed == {"proposals": []}
        warnings = [m.message for m in client.messages if FOREIGN in m.message]
        assert warnings == [ignored_message(crafted, workspace)]
        for proposal_id in crafted:
            for command, args in (
                ("nagent.review.show", {"id": proposal_id}),
                ("nagent.review.apply", {"id": proposal_id}),
                ("nagent.review.apply", {"id": proposal_id, "accept": ["h1"]}),
                ("nagent.review.discard", {"id": proposal_id}),
                ("nagent.review.discard", {"id": proposal_id, "hunks": ["h1"]}),
            ):
                error = await editor.command_error(command, args)
                assert error.code == INVALID_PARAMS, error.message
                assert (
                    "'id'" in error.message and f"proposal {proposal_id} was not made by this server" in error.message
                )
                assert "left untouched" in error.message and "Traceback" not in error.message
        assert not editor.recorded.apply_edits
        nothing_written(before, workspace, outside)

        # This server's own proposal in the same clone: listed, its hunk shown on the document, applied.
        editor.open(target)
        fake_model.script(text(f'<nagent-write path="app.py">\n{CHANGED}</nagent-write>'), DONE)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "name v3", "preview": True})
        mine = result["proposal"]["id"]
        assert [p["id"] for p in (await editor.command("nagent.review.list"))["proposals"]] == [mine]
        assert await wait_until(lambda: client.diagnostics.get(editor.uri(target)), timeout=GUARD)
        assert {d.data["proposal"] for d in client.diagnostics[editor.uri(target)]} == {mine}
        shown = await editor.command("nagent.review.show", {"id": mine})
        assert [h["id"] for f in shown["files"] for h in f["hunks"]] == ["h1"]
        applied = await editor.command("nagent.review.apply", {"id": mine})
        assert applied["applied"] is True and editor.text(target) == CHANGED
        assert len(editor.recorded.apply_edits) == 1
        # Reported once per server: none of these commands said it again.
        assert [m.message for m in client.messages if FOREIGN in m.message] == [ignored_message(crafted, workspace)]
    after = snapshot(workspace, outside)
    assert {k: v for k, v in after.items() if "/proposals/" in k and mine not in k} == {
        k: v for k, v in before.items() if "/proposals/" in k
    }
    assert not (outside / "site-packages" / "evil.pth").exists() and not (outside / "new.py").exists()
    assert (workspace / ".git" / "hooks" / "pre-commit").read_text() == HOOK


# -- the CLI -------------------------------------------------------------------------------------------------
def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if FOREIGN in line]


def test_shipped_proposals_are_never_used_by_the_cli(tmp_path, workspace, fake_model, model_env) -> None:
    crafted, outside = attacker_clone(tmp_path, workspace)
    before = snapshot(workspace, outside)
    listed = run("review", "list", cwd=workspace, env=model_env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"proposals": []}
    assert warning_lines(listed.stderr) == [f"warning: {ignored_message(crafted, workspace)}"]
    for proposal_id in crafted:
        for action in ("show", "apply", "discard"):
            out = run("review", action, proposal_id, cwd=workspace, env=model_env)
            assert out.returncode == 2, out
            assert (
                f"nagent-lsp: invalid argument 'id': proposal {proposal_id} was not made by this server" in out.stderr
            )
            assert "Traceback" not in out.stderr and "KeyError" not in out.stderr and out.stdout == ""
    nothing_written(before, workspace, outside)

    fake_model.script(text(f'<nagent-write path="app.py">\n{CHANGED}</nagent-write>'), DONE)
    edited = run("edit", "app.py", "name v3", "--review", cwd=workspace, env=model_env)
    assert edited.returncode == 0, edited.stderr
    (mine,) = [p["id"] for p in json.loads(run("review", "list", cwd=workspace, env=model_env).stdout)["proposals"]]
    applied = run("review", "apply", mine, cwd=workspace, env=model_env)
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] is True and (workspace / "app.py").read_text() == CHANGED
    assert not (outside / "site-packages" / "evil.pth").exists() and not (outside / "new.py").exists()


def own_proposal(workspace: Path, fake_model, model_env, body: str = CHANGED, path: str = "app.py") -> str:
    fake_model.script(text(f'<nagent-write path="{path}">\n{body}</nagent-write>'), DONE)
    edited = run("edit", path, "change it", "--review", cwd=workspace, env=model_env)
    assert edited.returncode == 0, edited.stderr
    listed = json.loads(run("review", "list", cwd=workspace, env=model_env).stdout)["proposals"]
    return listed[-1]["id"]


@pytest.mark.parametrize("edit", ["request", "path", "status of a hunk"])
def test_an_edited_proposal_of_the_servers_own_is_refused(edit, tmp_path, workspace, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("init", {"app.py": APP})])
    proposal_id = own_proposal(workspace, fake_model, model_env)
    file = proposals.folder(workspace / ".nagent", proposal_id) / proposals.PROPOSAL_FILE
    data = json.loads(file.read_text())
    if edit == "request":
        data["request"] = EVIL
    elif edit == "path":
        data["files"][0]["path"] = str(tmp_path / "victim.py")
        (tmp_path / "victim.py").write_text(APP)
    else:
        data["files"][0]["hunks"][0]["status"] = "rejected"
    file.write_text(json.dumps(data, indent=1))  # the MAC is kept: it no longer matches
    tampered = file.read_bytes()
    listed = run("review", "list", cwd=workspace, env=model_env)
    assert json.loads(listed.stdout) == {"proposals": []}
    assert warning_lines(listed.stderr) == [
        f"warning: ignored 1 proposal {FOREIGN}: {proposal_id} (in {workspace / '.nagent' / 'proposals'}; "
        "left untouched)"
    ]
    for action in ("show", "apply", "discard"):
        out = run("review", action, proposal_id, cwd=workspace, env=model_env)
        assert out.returncode == 2 and "its MAC does not verify" in out.stderr, out.stderr
    assert file.read_bytes() == tampered and (workspace / "app.py").read_text() == APP
    if edit == "path":
        assert (tmp_path / "victim.py").read_text() == APP


def test_a_folder_swapped_for_a_link_outside_is_refused_on_use(tmp_path, workspace, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("init", {"sub/mod.py": APP})])
    proposal_id = own_proposal(workspace, fake_model, model_env, path="sub/mod.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mod.py").write_text(APP)
    shutil.rmtree(workspace / "sub")
    (workspace / "sub").symlink_to(outside)  # the proposal's MAC still verifies: its path now leads outside
    listed = json.loads(run("review", "list", cwd=workspace, env=model_env).stdout)["proposals"]
    assert [p["id"] for p in listed] == [proposal_id]
    for action in ("show", "apply", "discard"):
        out = run("review", action, proposal_id, cwd=workspace, env=model_env)
        assert out.returncode == 2, out
        assert f"proposal {proposal_id} is refused" in out.stderr and "outside the workspace" in out.stderr
        assert "nothing was read or written" in out.stderr
    assert (outside / "mod.py").read_text() == APP and sorted(p.name for p in outside.iterdir()) == ["mod.py"]


def signed(workspace: Path, proposal: dict) -> Path:
    """A proposal written with this user's MAC (the test process shares the CLI's HOME): made by the server."""
    return proposals.create(workspace / ".nagent", proposal, "")


def test_a_malformed_proposal_of_the_servers_own_is_one_message(workspace, fake_model, model_env) -> None:
    build_repo(workspace, [Commit("init", {"app.py": APP})])
    good = own_proposal(workspace, fake_model, model_env)
    broken_id = "p20250101T000001Z-0000beef"
    broken = a_proposal(broken_id, str(workspace / "app.py"), str(workspace / ".nagent" / "conversations" / "a.md"))
    broken["files"][0]["hunks"][0]["start"] = "3"
    where = signed(workspace, broken)
    listed = run("review", "list", cwd=workspace, env=model_env)
    assert listed.returncode == 0, listed.stderr
    assert [p["id"] for p in json.loads(listed.stdout)["proposals"]] == [good]
    file = where / proposals.PROPOSAL_FILE
    assert listed.stderr.splitlines() == [
        f"warning: ignored proposal {broken_id}: {file}: field files.0.hunks.0.start: expected a whole number, "
        "got a string of 1 characters (left untouched)"
    ]
    shown = run("review", "show", broken_id, cwd=workspace, env=model_env)
    assert shown.returncode == 2 and "files.0.hunks.0.start" in shown.stderr and "Traceback" not in shown.stderr


def test_a_signed_proposal_whose_paths_lead_out_is_refused(tmp_path, workspace, fake_model, model_env) -> None:
    """Even with a valid MAC (a bug, or a proposal made before the rules changed), every path is confined on use."""
    build_repo(workspace, [Commit("init", {"app.py": APP})])
    site = tmp_path / "site-packages"
    site.mkdir()
    convo_ok = str(workspace / ".nagent" / "conversations" / "app.py.md")
    cases = {
        "p20250101T000001Z-00000001": a_proposal(
            "p20250101T000001Z-00000001", str(workspace / "app.py"), str(site / "x.pth")
        ),
        "p20250101T000002Z-00000002": a_proposal(
            "p20250101T000002Z-00000002", str(workspace / ".git" / "hooks" / "pre-commit"), convo_ok
        ),
        "p20250101T000003Z-00000003": a_proposal(
            "p20250101T000003Z-00000003", str(tmp_path / "new.py"), convo_ok, created=True
        ),
        "p20250101T000004Z-00000004": a_proposal(
            "p20250101T000004Z-00000004", str(workspace / ".nagent" / "config.json"), convo_ok, created=True
        ),
        "p20250101T000005Z-00000005": a_proposal("p20250101T000005Z-00000005", "app.py", convo_ok),
    }
    reasons = ["is not inside", "denyWrite", "outside the workspace", "state folder", "not an absolute path"]
    for proposal in cases.values():
        signed(workspace, proposal)
    for (proposal_id, _), reason in zip(cases.items(), reasons, strict=True):
        for action in ("show", "apply", "discard"):
            out = run("review", action, proposal_id, cwd=workspace, env=model_env)
            assert out.returncode == 2 and f"proposal {proposal_id} is refused" in out.stderr, out.stderr
            assert reason in out.stderr, out.stderr
    assert list(site.iterdir()) == [] and not (tmp_path / "new.py").exists()
    assert not (workspace / ".nagent" / "config.json").exists() and (workspace / "app.py").read_text() == APP


def test_the_current_text_is_read_within_max_file_bytes(workspace, fake_model, model_env, isolated_home) -> None:
    build_repo(workspace, [Commit("init", {"app.py": APP})])
    proposal_id = own_proposal(workspace, fake_model, model_env)
    (workspace / "app.py").write_text(APP + "#" * 5000 + "\n")
    config = isolated_home / ".nagent" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "maxFileBytes": 1000}))
    out = run("review", "show", proposal_id, cwd=workspace, env=model_env)
    assert out.returncode == 1 and "more than maxFileBytes (1000)" in out.stderr, out.stderr


# -- the secret, the ignore file, split indexes --------------------------------------------------------------
def test_the_secret_is_private_and_a_loose_one_is_never_used(isolated_home: Path, tmp_path: Path) -> None:
    proposal = a_proposal("p20250101T000001Z-00000001", "/x", "/y")
    root = tmp_path / "state"
    proposals.create(root, proposal, "")
    secret = isolated_home / ".nagent" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(bytes.fromhex(secret.read_text())) == 32
    assert isinstance(proposals.read(root, proposal["id"]), dict)
    secret.chmod(0o644)
    provenance._cache.clear()  # a new server: the secret is read again
    found = proposals.read(root, proposal["id"])
    assert isinstance(found, proposals.Rejected) and found.foreign and "not 0600" in found.reason
    with pytest.raises(provenance.ProvenanceError, match="not 0600"):
        proposals.create(root, {**proposal, "id": "p20250101T000002Z-00000002"}, "")
    secret.unlink()
    secret.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("00" * 32)
    (tmp_path / "elsewhere").chmod(0o600)
    provenance._cache.clear()
    found = proposals.read(root, proposal["id"])
    assert isinstance(found, proposals.Rejected) and "cannot be opened" in found.reason
    provenance._cache.clear()


def test_the_state_roots_gitignore(tmp_path: Path) -> None:
    fresh = ensure_root(tmp_path / "fresh" / ".nagent")
    assert (fresh / ".gitignore").read_text() == GITIGNORE
    for line in ("proposals/", "outputs/", "patches/", "cache/", "splits/", "secret", "txn/", "attribution/"):
        assert line in GITIGNORE.splitlines()
    assert "conversations/" not in GITIGNORE.splitlines()  # only its per-user files are (issue 28)
    older = tmp_path / "older" / ".nagent"
    older.mkdir(parents=True)
    (older / ".gitignore").write_text(LEGACY)
    ensure_root(older)
    assert (older / ".gitignore").read_text().splitlines()[1:] == [
        "cache/",
        "splits/",
        "proposals/",
        "outputs/",
        "patches/",
        "secret",
        "txn/",
        "conversations/file-index.json*",
        "conversations/.file-index.json*",
        "conversations/.manifest.json.*",
        "conversations/local/",
        "attribution/",
    ]
    added = tmp_path / "added" / ".nagent"
    added.mkdir(parents=True)
    (added / ".gitignore").write_text(GITIGNORE.replace("patches/\n", "") + "notes/\n")
    ensure_root(added)
    assert (added / ".gitignore").read_text() == GITIGNORE.replace("patches/\n", "") + "notes/\npatches/\n"
    users = tmp_path / "users" / ".nagent"
    users.mkdir(parents=True)
    (users / ".gitignore").write_text("*.md\n")
    ensure_root(users)
    assert (users / ".gitignore").read_text() == "*.md\n"


def test_a_split_index_with_matching_inodes_but_no_mac_is_refused(tmp_path: Path) -> None:
    from nagent_lsp.store.split_index import UntrustedIndex, load_index, write_index

    folder = tmp_path / "splits" / "one"
    folder.mkdir(parents=True)
    (folder / "seg-0001.py").write_text(APP)
    index = {
        "source_path": str(tmp_path / "app.py"),
        "segments": [{"start_line_num": 1, "end_line_num": 10, "path": str(folder / "seg-0001.py")}],
    }
    write_index(folder / "index.json", index)
    assert load_index(folder / "index.json")["source_path"] == str(tmp_path / "app.py")
    stamped = json.loads((folder / "index.json").read_text())
    for forged in ({k: v for k, v in stamped.items() if k != "mac"}, {**stamped, "source_path": "/etc/passwd"}):
        (folder / "index.json").write_text(json.dumps(forged))  # the inode stamp is right: only the MAC is not
        with pytest.raises(UntrustedIndex, match="MAC does not verify"):
            load_index(folder / "index.json")
