"""`nagent-lsp history FILE` run as a program starts its git work before the command line is parsed (issue 29,
headless/history_early.py), folds the isolation probe into the config read (core/isolation.py), and leaves without
finalising the interpreter once its answer is written. None of that may change what git is asked, how often, or
what the user reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nagent_lsp.core import isolation
from nagent_lsp.headless.history_early import plain_words
from nagent_lsp.history.git import GitError, GitRepository
from tests.harness.gitrepo import Commit, build_repo
from tests.test_history_cli_cold import ANN, BOB, cli_history, general_text, make_repo


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["a.py"], ("a.py", None)),
        (["a.py", "--max-commits", "7"], ("a.py", 7)),
        (["--max-commits=7", "a.py"], ("a.py", 7)),
        (["--max-commits", "7", "a.py"], ("a.py", 7)),
        ([], (None, None)),  # argparse says what is missing
        (["a.py", "b.py"], (None, None)),
        (["a.py", "--json"], (None, None)),  # the general path (cattrs), nothing to start early
        (["--max", "7", "a.py"], (None, None)),  # an abbreviation argparse accepts: left to argparse
        (["a.py", "--max-commits"], (None, None)),
        (["a.py", "--max-commits", "-1"], (None, None)),
        (["a.py", "--max-commits", "٣"], (None, None)),  # a digit to str.isdigit, not to int() in argparse's sense
        (["--", "a.py"], (None, None)),
        (["-v"], (None, None)),
    ],
)
def test_only_the_plain_forms_start_early(words: list[str], expected: tuple) -> None:
    assert plain_words(words) == expected


def traced_history(root: Path, rel: str, trace: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TRACE": str(trace)}  # git's own trace: one line per git command, from every child
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", "history", rel, *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def git_commands(trace: Path) -> list[str]:
    return [line.split("trace: built-in: ", 1)[1] for line in trace.read_text().splitlines() if "built-in: " in line]


@pytest.mark.parametrize("extra", [(), ("--max-commits", "3"), ("--max-commits=3",)])
def test_early_work_is_used_not_repeated(tmp_path: Path, isolated_home: Path, extra: tuple[str, ...]) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    trace = tmp_path / "trace.txt"
    done = traced_history(root, "src/app.py", trace, *extra)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    commands = git_commands(trace)
    configs = [c for c in commands if c.startswith("git config")]
    logs = [c for c in commands if c.startswith("git log")]
    assert len(configs) == 1, commands  # the repository's config read once, by the probe's own process
    # the page, and (when 3 commits do not fill the window) the page for the name before the rename; each once
    assert len(logs) == len(set(logs)) == (1 if extra else 2), commands
    assert logs[0].endswith("-- src/app.py") and (extra or logs[1].endswith("-- app.py"))
    assert done.stdout == general_text(root, "src/app.py", *extra)


def test_a_form_left_to_argparse_answers_the_same(tmp_path: Path, isolated_home: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    abbreviated = cli_history(root, "src/app.py", "--max", "3")
    assert abbreviated.returncode == 0, abbreviated.stderr
    assert abbreviated.stdout == cli_history(root, "src/app.py", "--max-commits", "3").stdout


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path, isolated_home: Path) -> None:
    root = tmp_path / "repo"
    build_repo(
        root,
        [Commit(f"change {i}", {"a.py": f"{i}\n", f"b{i}.py": "x\n"}, **(ANN if i % 2 else BOB)) for i in range(30)],
    )
    reader = subprocess.Popen(
        [sys.executable, "-m", "nagent_lsp", "history", "a.py"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.read(1) == b"a"  # `| head -c1`: read one byte, then go away
    reader.stdout.close()
    assert reader.wait(timeout=120) == 0
    assert reader.stderr.read() == b""


# -- the isolation probe folded into the first git call ---------------------------------------------------------


@pytest.fixture
def unprobed(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if it had not probed yet; skipped where no PID namespace can be made."""
    monkeypatch.delenv(isolation.ISOLATION_SWITCH, raising=False)
    monkeypatch.setattr(isolation, "_probed", [])
    if isolation.namespace_prefix_blocking() is None:
        pytest.skip("no PID namespace here: nothing to fold")
    monkeypatch.setattr(isolation, "_probed", [])


def test_the_first_command_runs_inside_the_namespace_the_probe_verified(unprobed: None, tmp_path: Path) -> None:
    command = ["bash", "-c", 'echo "pid $$"; echo said >&2; exit 3']
    prefix, ran = isolation.namespace_prefix_with(command, {"PATH": os.environ["PATH"]}, str(tmp_path))
    assert prefix is not None and ran == isolation.Ran(3, b"pid 1\n", b"said\n")  # exec'd: PID 1 of its namespace
    assert isolation.namespace_prefix_with(command, {}, str(tmp_path)) == (prefix, None)  # probed once per process


def test_a_failing_check_never_runs_the_command(
    unprobed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "CHECK_THEN", "exit 1; " + isolation.CHECK_THEN)  # as if /proc could be unmounted
    marker = tmp_path / "ran"
    prefix, ran = isolation.namespace_prefix_with(["touch", str(marker)], {"PATH": os.environ["PATH"]}, str(tmp_path))
    assert (prefix, ran) == (None, None) and not marker.exists()


def test_a_command_may_outlast_the_checks_time_limit(
    unprobed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "CHECK_TIMEOUT", 0.2)
    command = ["bash", "-c", "sleep 1; echo finished"]
    prefix, ran = isolation.namespace_prefix_with(command, {"PATH": os.environ["PATH"]}, str(tmp_path))
    assert prefix is not None and ran == isolation.Ran(0, b"finished\n", b"")


def test_a_check_that_hangs_is_no_namespace(unprobed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "CHECK_TIMEOUT", 0.2)
    monkeypatch.setattr(isolation, "CHECK_THEN", "sleep 30; " + isolation.CHECK_THEN)
    marker = tmp_path / "ran"
    prefix, ran = isolation.namespace_prefix_with(["touch", str(marker)], {"PATH": os.environ["PATH"]}, str(tmp_path))
    assert (prefix, ran) == (None, None) and not marker.exists()


def test_the_folded_config_read_reads_and_fails_as_any_other(unprobed: None, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    build_repo(root, [Commit("one", {"a.py": "1\n"}, **ANN)])
    subprocess.run(["git", "config", "diff.evil.textconv", "touch /tmp/never"], cwd=root, check=True)
    folded = GitRepository(root).config()  # the probe runs `git config` itself
    assert isolation._probed and ("diff.evil.textconv", "touch /tmp/never") in [(e.key, e.value) for e in folded]
    from nagent_lsp.history import git

    git._drivers.clear()
    assert GitRepository(root).config() == folded  # read again as every other git call runs
    broken = tmp_path / "broken"
    build_repo(broken, [Commit("one", {"a.py": "1\n"}, **ANN)])
    with open(broken / ".git" / "config", "a", encoding="utf-8") as f:
        f.write("[oops\n")
    messages = []
    for fresh in (True, False):
        if fresh:
            isolation._probed.clear()
        git._drivers.clear()
        with pytest.raises(GitError) as failed:
            GitRepository(broken).config()
        messages.append(str(failed.value))
    assert messages[0] == messages[1] and "git config -z --show-scope failed (128)" in messages[0]


def test_programs_are_never_found_in_relative_path_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "unshare"
    planted.write_text("#!/bin/sh\ntouch planted-ran\n", encoding="utf-8")
    planted.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", os.environ["PATH"]]))
    found = isolation.which("unshare")
    assert found != "unshare" and found != os.path.join(".", "unshare") and (found is None or os.path.isabs(found))
    monkeypatch.setenv("PATH", ".")
    assert isolation.which("unshare") is None


def test_git_errors_arrive_when_tmpdir_is_unusable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    build_repo(root, [Commit("one", {"a.py": "1\n"}, **ANN)])
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))  # no O_TMPFILE there: tempfile's own file instead
    with pytest.raises(GitError, match=r"git cat-file -t no-such-ref failed \(128\): fatal: Not a valid object name"):
        GitRepository(root).run(["cat-file", "-t", "no-such-ref"])
