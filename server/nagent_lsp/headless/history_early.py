"""`nagent-lsp history FILE` run as a program: its git work starts before the command line is parsed (issue 29).

The cold answer (headless/history_cold.py) waits on one chain of git processes: the isolation probe, the
repository's config (which drivers to switch off), the file's first page. Started here, first thing after
`secure_start`, that chain runs on the other core while the interpreter imports the parser and the rest, instead
of after them. Only the plain forms are recognised (`history FILE`, with `--max-commits N`); anything else starts
nothing. argparse still has the last word: history_cold uses what was started here only for the very plan its
parsed arguments make, and a guess that was wrong costs one unused `git log`.

What this module imports is what the chain needs: the config read (the isolation probe's own process runs it,
core/isolation.namespace_prefix_with) starts before the cold path's modules are imported."""

from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path

from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.log_setup import set_up_later

# The chain's thread needs the interpreter's lock between its processes while this thread imports; the default
# switch interval (5 ms) would add up to that much to each hand-over.
SWITCH_INTERVAL = 0.0005
_DEFAULT_SWITCH_INTERVAL = sys.getswitchinterval()


def start_early(words: list[str]) -> None:
    file, max_commits = plain_words(words)
    if file is None:
        return
    set_up_later(0, None)  # the plain forms carry no -v or --log-file: what cli.main sets up again after parsing
    sys.setswitchinterval(SWITCH_INTERVAL)
    # A one-shot answer from one page of commits: no collection of the import-time objects while it runs.
    # history.history turns it back on when the general path answers instead.
    gc.disable()
    try:
        path = Path(file).resolve()
        read_git_config_soon(path)
        from nagent_lsp.headless.history_cold import cold_plan, start_log

        plan = cold_plan(path, max_commits)
    except (OSError, RuntimeError, ValueError):
        return  # the command says what is wrong with FILE once it runs
    if plan is not None:
        start_log(plan)


def back_to_defaults() -> None:
    """The general path answers instead (its thread pools, a whole index decoded): the collector on again and the
    interpreter's usual switch interval."""
    gc.enable()
    sys.setswitchinterval(_DEFAULT_SWITCH_INTERVAL)


_config_read: set[str] = set()  # the repositories read_git_config_soon started a read for


def read_git_config_soon(file: Path) -> None:
    """Read the git config of FILE's repository (which drivers to switch off, history/git.py) on a thread, while
    this one imports the rest (issue 29). Usually the process's first git call: the isolation probe runs it in the
    namespace it verifies. The first query then finds it cached, or waits for this one read, never runs a second."""
    top = git_toplevel(str(file if file.is_dir() else file.parent))
    if top is None or top in _config_read:
        return
    _config_read.add(top)
    # imported here, not on the thread: the thread then starts git at once instead of sharing the interpreter lock
    # with this one's imports
    from nagent_lsp.history.git import GitError, GitRepository

    def read() -> None:
        try:
            GitRepository(os.path.realpath(top)).config()
        except GitError:
            pass  # the query reads it again and says what went wrong

    threading.Thread(target=read, name="nagent-git-config", daemon=True).start()


def plain_words(words: list[str]) -> tuple[str | None, int | None]:
    """(FILE, --max-commits) of the plain forms of `history`'s arguments, else (None, None)."""
    file: str | None = None
    max_commits: int | None = None
    rest = iter(words)
    for word in rest:
        if word == "--max-commits" or word.startswith("--max-commits="):
            value = word.partition("=")[2] if "=" in word else next(rest, "")
            if not (value.isascii() and value.isdigit()):
                return None, None
            max_commits = int(value)
        elif word.startswith("-") or file is not None:
            return None, None
        else:
            file = word
    return file, max_commits
