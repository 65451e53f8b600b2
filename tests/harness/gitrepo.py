"""Build REAL git repositories in temporary folders from a short description of commits.

Usage::

    from tests.harness.gitrepo import Commit, build_repo, add_commit

    hashes = build_repo(tmp_path / "repo", [
        Commit("add app", {"app.py": "print(1)\n", "README.md": "hi\n"}, author="Ann", email="ann@x.org"),
        Commit("rename", renames={"app.py": "src/app.py"}, author="Bob", email="bob@x.org"),
        Commit("edit", {"src/app.py": "print(2)\n"}, date="2024-03-01T12:00:00"),
        Commit("drop readme", {"README.md": None}),            # None deletes the file
        Commit("topic work", {"t.txt": "x\n"}, branch="topic"),  # made on branch "topic" (created from HEAD)
        Commit("merge topic", merge="topic"),                   # --no-ff merge of "topic" into the main branch
    ])
    more = add_commit(tmp_path / "repo", Commit("later", {"src/app.py": "print(3)\n"}))

- `build_repo(path, commits, branch="main") -> list[str]`: `git init` at `path` (created if missing) and make every
  commit in order; returns the full hashes (one per Commit, merges included).
- `add_commit(path, commit) -> str`: one more commit on an existing repository (uses its current branch unless the
  Commit names one); returns the hash.
- `Commit` fields: `message`; `files` {path: text | bytes | None (delete)}; `renames` {old: new} applied with
  `git mv` before `files`; `author`, `email`; `date` (ISO string, epoch int, or None: one day after the previous
  commit in this repository, starting 2024-01-01 UTC); `branch` (commit on this branch, created from the current
  HEAD when new; the repository stays on it afterwards, so end with a Commit(branch="main") to come back);
  `merge` (name of a branch merged with --no-ff into `branch`/the current branch; `files` are then ignored).
- Every git run is isolated from the user's configuration (no global/system config, fixed committer), so results
  are the same on every machine. Files are written byte-for-byte (no newline translation).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

BASE_EPOCH = 1704067200  # 2024-01-01T00:00:00Z
DAY = 86400


@dataclass
class Commit:
    message: str
    files: dict[str, str | bytes | None] = field(default_factory=dict)
    renames: dict[str, str] = field(default_factory=dict)
    author: str = "Alice Example"
    email: str = "alice@example.com"
    date: str | int | None = None
    branch: str | None = None
    merge: str | None = None


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_COMMITTER_NAME="Harness Committer",
        GIT_COMMITTER_EMAIL="committer@example.com",
        GIT_TERMINAL_PROMPT="0",
    )
    env.update(extra or {})
    return env


def git(path: Path | str, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
    """Run one git command in `path` and return its stdout (raises CalledProcessError with stderr on failure)."""
    done = subprocess.run(["git", *args], cwd=path, env=env or git_env(), input=input, capture_output=True, check=False)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout.decode("utf-8", "replace")


def _epoch(date: str | int | None, previous: int | None) -> int:
    if date is None:
        return BASE_EPOCH if previous is None else previous + DAY
    if isinstance(date, int):
        return date
    parsed = datetime.fromisoformat(date)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def _last_epoch(path: Path) -> int | None:
    try:
        out = git(path, "log", "-1", "--format=%at", "--all")
    except subprocess.CalledProcessError:
        return None
    return int(out.strip()) if out.strip() else None


def _current_branch(path: Path) -> str:
    return git(path, "symbolic-ref", "--short", "HEAD").strip()


def _make(path: Path, commit: Commit, previous: int | None) -> tuple[str, int]:
    when = _epoch(commit.date, previous)
    stamp = f"@{when} +0000"
    env = git_env(
        {
            "GIT_AUTHOR_NAME": commit.author,
            "GIT_AUTHOR_EMAIL": commit.email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
    )
    if commit.branch and commit.branch != _current_branch(path):
        exists = (
            subprocess.run(
                ["git", "rev-parse", "--verify", "-q", f"refs/heads/{commit.branch}"],
                cwd=path,
                env=env,
                capture_output=True,
            ).returncode
            == 0
        )
        git(path, "checkout", "-q", *(() if exists else ("-b",)), commit.branch, env=env)
    if commit.merge:
        git(path, "merge", "-q", "--no-ff", "-m", commit.message, commit.merge, env=env)
    else:
        for old, new in commit.renames.items():
            (path / new).parent.mkdir(parents=True, exist_ok=True)
            git(path, "mv", old, new, env=env)
        for name, content in commit.files.items():
            target = path / name
            if content is None:
                if target.exists():
                    target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        git(path, "add", "-A", env=env)
        git(path, "commit", "-q", "--allow-empty", "--no-verify", "-m", commit.message, env=env)
    return git(path, "rev-parse", "HEAD", env=env).strip(), when


def build_repo(path: Path | str, commits: list[Commit], branch: str = "main") -> list[str]:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    hashes: list[str] = []
    previous: int | None = None
    for commit in commits:
        sha, previous = _make(path, commit, previous)
        hashes.append(sha)
    return hashes


def add_commit(path: Path | str, commit: Commit) -> str:
    path = Path(path)
    sha, _ = _make(path, commit, _last_epoch(path))
    return sha
