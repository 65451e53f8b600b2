"""A multi-file change set the CLI applies is all or nothing (`store.transaction`): `nagent-lsp review apply` of a
40-file proposal killed at 20 points of its transaction (NAGENT_LSP_TEST_CRASH_AFTER, a deterministic seed), then
the next CLI command: every time either all or none of the 40 files changed, no temp file is left in the work tree,
and the proposal's state (pending, or applied with its patch) says what happened to the files."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

from nagent_lsp.store.transaction import CRASH_ENV
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.test_cli import cli
from tests.test_review_cli import no_terminal

FILES = 39  # changed, plus one created: 40 files
KILLED = 137  # what the hook exits with, as a SIGKILLed process reports 128 + 9
SEED = 22
TRIALS = 20


def old(i: int) -> str:
    return "".join(f"value_{i}_{n} = {n}\n" for n in range(30))


def new(i: int) -> str:
    return old(i).replace(f"value_{i}_7 = 7", f"value_{i}_7 = 'seven'").replace(f"value_{i}_20 = 20", "# twenty\n")


NEW_FILE = "created = True\n"


def names() -> list[str]:
    return [f"f{i:02}.py" for i in range(FILES)]


def make_proposal(workspace: Path, fake_model, model_env: dict[str, str]) -> str:
    build_repo(workspace, [Commit("init", {name: old(i) for i, name in enumerate(names())})])
    writes = "".join(f'<nagent-write path="{name}">\n{new(i)}</nagent-write>' for i, name in enumerate(names()))
    writes += f'<nagent-write path="n_created.py">\n{NEW_FILE}</nagent-write>'
    fake_model.script(text(writes), text("<nagent-response>done</nagent-response>"))
    out = no_terminal("edit", "f00.py", "change them all", "--review", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    (proposal,) = json.loads(cli("review", "list", cwd=workspace, env=model_env).stdout)["proposals"]
    assert len(proposal["files"]) == FILES + 1
    return str(proposal["id"])


def state(workspace: Path) -> tuple[int, bool]:
    """How many of the 39 files hold their new text (the others must hold their old one) and whether the new file
    exists (with its text)."""
    changed = 0
    for i, name in enumerate(names()):
        now = (workspace / name).read_text(encoding="utf-8")
        assert now in (old(i), new(i)), f"{name} is neither its old nor its new text"
        changed += now == new(i)
    created = workspace / "n_created.py"
    assert not created.exists() or created.read_text(encoding="utf-8") == NEW_FILE
    return changed, created.exists()


def leftovers(workspace: Path) -> list[str]:
    """Temp files anywhere in the work tree (outside .git), and anything left in the transactions' folder."""
    found = []
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d != ".git"]
        found += [str(Path(folder, f)) for f in files if f.endswith((".tmp", ".new")) or ".tmp" in f]
    txn = workspace / ".nagent" / "txn"
    if txn.exists():
        found += [str(p) for p in txn.iterdir()]
    return found


def untracked(workspace: Path) -> list[str]:
    """What `git add -A` would add besides the change itself and nagent's own data (conversations): untracked files
    that are not ignored."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=workspace, capture_output=True, text=True
    ).stdout
    paths = [line[3:] for line in out.splitlines() if line.startswith("??") and line[3:] != "n_created.py"]
    return [p for p in paths if not p.startswith(".nagent/") or "txn" in p or p.endswith(".tmp")]


def reset(workspace: Path, saved: Path, proposal_dir: Path) -> None:
    for i, name in enumerate(names()):
        (workspace / name).write_text(old(i), encoding="utf-8")
    (workspace / "n_created.py").unlink(missing_ok=True)
    shutil.rmtree(proposal_dir)
    shutil.copytree(saved, proposal_dir)
    shutil.rmtree(workspace / ".nagent" / "patches", ignore_errors=True)


def test_apply_killed_anywhere_leaves_all_or_nothing(workspace: Path, fake_model, model_env, tmp_path: Path) -> None:
    proposal_id = make_proposal(workspace, fake_model, model_env)
    proposal_dir = workspace / ".nagent" / "proposals" / proposal_id
    saved = tmp_path / "saved-proposal"
    shutil.copytree(proposal_dir, saved)
    # The steps of this transaction: 42 temps (40 files, the patch, the proposal's record), the journal, 43 renames
    # (the `pending` mark's deletion too), the cleanup. Killed after k of them, k < 87: always before the end.
    steps = 42 + 1 + 43 + 1
    kills = sorted(random.Random(SEED).sample(range(steps), TRIALS))
    outcomes = []
    for k in kills:
        reset(workspace, saved, proposal_dir)
        crashed = cli("review", "apply", proposal_id, cwd=workspace, env={**model_env, CRASH_ENV: str(k)})
        assert crashed.returncode == KILLED, (k, crashed.returncode, crashed.stdout, crashed.stderr)
        assert [p.name for p in (workspace / ".nagent" / "txn").iterdir()], "the kill left no transaction to recover"
        # The next CLI command finishes or undoes the interrupted change before anything else.
        listed = cli("review", "list", cwd=workspace, env=model_env)
        assert listed.returncode == 0, listed.stderr
        pending = [p["id"] for p in json.loads(listed.stdout)["proposals"]]
        changed, created = state(workspace)
        assert (changed, created) in ((0, False), (FILES, True)), f"killed after {k} steps: {changed}/{FILES} changed"
        assert leftovers(workspace) == [], k
        assert untracked(workspace) == [], k
        record = json.loads((proposal_dir / "proposal.json").read_text(encoding="utf-8"))
        patches = list((workspace / ".nagent" / "patches").glob("*.patch"))
        if changed:
            assert pending == [] and record["status"] == "applied" and not (proposal_dir / "pending").exists(), k
            (patch,) = patches
            assert patch.read_text(encoding="utf-8").count("+++ b/") == FILES + 1
        else:
            assert pending == [proposal_id] and record["status"] == "pending", k
            assert patches == [], k
        assert bool(changed) == (k >= 43), k  # the journal (step 43) is the commit point
        outcomes.append((k, "all" if changed else "none"))
    # Both outcomes happened (a kill before the journal undoes, one after it finishes), each as a whole.
    assert {o for _k, o in outcomes} == {"all", "none"}, outcomes
    print("kills (steps, outcome):", outcomes)
    # Without a kill the apply goes through and the proposal is resolved.
    reset(workspace, saved, proposal_dir)
    applied = cli("review", "apply", proposal_id, cwd=workspace, env=model_env)
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] is True and state(workspace) == (FILES, True)
    assert leftovers(workspace) == []


def test_recovery_never_overwrites_a_file_the_user_changed_after_the_crash(tmp_path: Path) -> None:
    """Killed after the journal and one rename; the user then edits a file not yet renamed: recovery finishes the
    others and keeps that file's new content aside, saying where."""
    import sys

    from nagent_lsp.store.transaction import recover

    work, root = tmp_path / "work", tmp_path / "work" / ".nagent"
    work.mkdir()
    for name in ("a", "b", "c"):
        (work / name).write_text(f"old {name}\n")
    script = (
        "import sys; from pathlib import Path; from nagent_lsp.store.transaction import Write, commit; "
        "w = Path(sys.argv[1]); "
        "commit(w / '.nagent', [Write(w / n, f'new {n}\\n'.encode()) for n in ('a', 'b', 'c')])"
    )
    # Steps: 3 temps, the journal, then the renames: exit after the first rename (the 5th step).
    killed = subprocess.run(
        [sys.executable, "-c", script, str(work)], env={**os.environ, CRASH_ENV: "5"}, capture_output=True, text=True
    )
    assert killed.returncode == KILLED, killed.stderr
    assert [(work / n).read_text() for n in "abc"] == ["new a\n", "old b\n", "old c\n"]
    (work / "b").write_text("the user's b\n")
    said = recover(root)
    assert [(work / n).read_text() for n in "abc"] == ["new a\n", "the user's b\n", "new c\n"]
    kept = [p for p in (root / "txn").glob("recovered-*/b")]
    assert [p.read_text() for p in kept] == ["new b\n"]
    assert any("changed since" in line and str(kept[0]) in line for line in said), said
    assert recover(root) == []  # done once
