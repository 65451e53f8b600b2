"""The repository's commit-msg hook (.githooks/commit-msg, CONTRIBUTING.md): run by git itself on real commits,
and directly on the messages git hands it (comments, the verbose diff, git's own subjects)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.gitrepo import git, git_env

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / ".githooks" / "commit-msg"

GOOD = "Rename config/args.py to config/parse_args.py\n\nTwo modules named args.py held different things.\n"
SUBJECT_73 = "x" * 69 + " y z"  # 73 characters, 3 words


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh repository whose hooks are this checkout's .githooks (as `git config core.hooksPath` sets)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "core.hooksPath", str(HOOK.parent))
    git(path, "config", "user.name", "Ann")
    git(path, "config", "user.email", "ann@example.com")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    return path


def commit(repo: Path, *messages: str) -> subprocess.CompletedProcess[str]:
    args = [a for m in messages for a in ("-m", m)]
    return subprocess.run(
        ["git", "commit", "-q", *args], cwd=repo, env=git_env(), capture_output=True, text=True, check=False
    )


def test_the_hook_is_committed_executable():
    """A clone gets the exec bit only from the index: without 100755 git would skip the hook with a warning."""
    listed = subprocess.run(
        ["git", "ls-files", "-s", "--", ".githooks/commit-msg"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout (an exported tree): no index to read the mode from")
    mode = listed.stdout.split(" ")[0]
    assert mode == "100755" and os.access(HOOK, os.X_OK), mode


def test_git_refuses_a_long_subject_and_takes_a_good_message(repo: Path):
    refused = commit(repo, "Rename the args module, update every import, and explain why in the subject too, at length")
    assert refused.returncode != 0
    assert "commit-msg: the subject is 90 characters, at most 72" in refused.stderr
    assert subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=repo, capture_output=True).returncode
    done = commit(
        repo, "Rename config/args.py to config/parse_args.py", "Two modules named args.py held different things."
    )
    assert done.returncode == 0, done.stderr
    assert git(repo, "log", "-1", "--format=%s").strip() == "Rename config/args.py to config/parse_args.py"


def test_git_refuses_a_subject_without_body(repo: Path):
    refused = commit(repo, "Rename config/args.py to config/parse_args.py")
    assert refused.returncode != 0 and "no body" in refused.stderr


@pytest.mark.parametrize(
    "message, expected",
    [
        ("", "the message is empty"),
        ("# only a comment\n", "the message is empty"),
        (SUBJECT_73 + "\n\nwhy\n", "the subject is 73 characters, at most 72"),
        ("é" * 40 + " " + "é" * 31 + "\n\nwhy\n", None),  # 72 characters, 143 bytes: characters count
        ("é" * 40 + " " + "é" * 32 + "\n\nwhy\n", "the subject is 73 characters"),
        ("fix\n\nwhy\n", "does not say what changed"),
        ("Rename a to b\nwhy, with no blank line\n", "the second line must be blank"),
        ("Rename a to b\n", "no body"),
        ("Rename a to b\n\n\n", "no body"),
        (GOOD, None),
        ("\n\n" + GOOD + "\n\n", None),  # leading and trailing blank lines are git's to strip
        ("Merge branch 'topic'\n", None),
        ('Revert "Rename a to b"\n\nThis reverts commit 0123abc.\n', None),
        ("fixup! Rename a to b\n", None),
    ],
)
def test_messages(tmp_path: Path, message: str, expected: str | None):
    done = run_hook(tmp_path, message)
    if expected is None:
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
    else:
        assert done.returncode == 1
        assert expected in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_comments_and_the_verbose_diff_are_not_the_message(tmp_path: Path):
    """`git commit -v` puts the diff under a scissors line; git drops it and the comments, and so does the hook."""
    editor = (
        "Rename a to b\n\nBecause.\n# Please enter the commit message for your changes.\n"
        "# ------------------------ >8 ------------------------\n# Do not modify or remove the line above.\n"
        "diff --git a/a b/b\n" + "+" + "x" * 200 + "\n"
    )
    assert run_hook(tmp_path, editor).returncode == 0
    subject_only = "Rename a to b\n# ------------------------ >8 ------------------------\n\nbody below the scissors\n"
    assert "no body" in run_hook(tmp_path, subject_only).stderr
