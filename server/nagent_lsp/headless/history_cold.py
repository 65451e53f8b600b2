"""The cold answer of `nagent-lsp history FILE`: the first `history` in a repository no server has indexed.

Issue 29 measures it against the CLI's own minimal start (`nagent-lsp --version`) plus the one `git log` the answer
needs. The general path (operations/history.py through a Session) pays for the settings model, attrs, the history
service and its thread pools before git even starts: three times that floor. This path answers the same question
with the same functions (history/first_page.py, history/render.py, agent/confine.py) and nothing else, and only
when it can prove the general path would answer from a first page with the default settings:

- no settings source sets anything the answer reads (`history.*`, `denyRead`, `stateRoot`), and each config file
  is a readable JSON object (else the general path reads them and reports their problems);
- the state root holds no history index or summary cache (then the general path loads them: a complete answer), and
  no interrupted change set (the general path finishes or undoes it before anything reads files);
- the file is inside a git repository with a HEAD, and the read rules allow it (else the general path's error).

Otherwise it returns None and the general path answers. Its text is the general path's, word for word
(tests/test_history_cli_cold.py runs both); `--json` always takes the general path (cattrs). Settings problems in
keys `history` does not read are not reported here: the server and `nagent-lsp status` report them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from nagent_lsp.agent.confine import Refused, confine_read
from nagent_lsp.config.defaults import (
    DEFAULT_DENY_READ,
    DEFAULT_MAX_CHANGESET_FILES,
    DEFAULT_MAX_COMMITS,
    FIRST_PAGE,
)
from nagent_lsp.config.state_root import STATE_DIR, git_toplevel, repo_relative, user_config_path
from nagent_lsp.history.encoding import git_arg, to_bytes
from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.history.refs import read_head
from nagent_lsp.store.root import CACHE, SUMMARIES, TXN

if TYPE_CHECKING:
    from nagent_lsp.history.render import HistoryView

# Top-level settings keys whose value would change this answer (nested {"history": {…}} or dotted "history.x").
READ_KEYS = ("history", "denyRead", "stateRoot")
INDEX_NAME = ("history-", ".idx")  # history/service.py's index file: history-<digest of the root>.idx


class ColdPlan(NamedTuple):
    root: Path  # the repository, symlinks resolved
    rel: str  # the file in it
    head: str
    window: int  # maxCommits: the commits the answer may show
    size: int  # the first page's query size


def cold_history_text(file: Path, max_commits: int | None) -> str | None:
    """The text `nagent-lsp history FILE` prints, or None when the general path must answer."""
    plan = cold_plan(file, max_commits)
    if plan is None:
        return None
    early = _started.pop(plan, None) or _early_log(plan)
    # Imported while git runs on the other core (the isolation probe, the config read, the first query).
    from nagent_lsp.history.first_page import CountRules, history_view, partners_kept, read_first_page
    from nagent_lsp.history.ignore_revs import read_ignore_revs
    from nagent_lsp.history.logparse import parse_log

    page = read_first_page(early, plan.root, to_bytes(plan.rel), plan.head, plan.size, lambda s: list(parse_log(s)))
    if page.problem:
        return None  # the general path says what git could not read, with the same words as every front end
    keep = partners_kept(page.repo_index, None, drop_dead=False, alive=page.alive)
    rules = CountRules(plan.window, DEFAULT_MAX_CHANGESET_FILES, read_ignore_revs(plan.root))
    return _text(history_view(page.repo_index, page.lineage, None, plan.root, rules, keep), plan.window)


_started: dict[ColdPlan, EarlyLog] = {}  # by start_log, for the first cold_history_text with the same plan


def start_log(plan: ColdPlan) -> None:
    """Start the plan's first query now (headless/history_early.py: before the command line is parsed)."""
    _started[plan] = _early_log(plan)


def _early_log(plan: ColdPlan) -> EarlyLog:
    return EarlyLog(GitRepository(plan.root), (git_arg(to_bytes(plan.rel)),), plan.size, plan.head)


def cold_plan(file: Path, max_commits: int | None) -> ColdPlan | None:
    """What the cold answer asks git, when every condition in the module's docstring holds; else None."""
    if max_commits is not None and max_commits < 1:
        return None  # the general path names the bad argument
    path = file.resolve()
    top = git_toplevel(str(path if path.is_dir() else path.parent))
    if top is None:
        return None
    folder = Path(top)  # the CLI's workspace folder (headless/common.session_for)
    state = folder / STATE_DIR
    if (
        not _defaults_hold(state / "config.json")
        or _has_history_state(state / CACHE)
        or _has_pending_change(state / TXN)
    ):
        return None
    try:
        confine_read(path, [folder], DEFAULT_DENY_READ)
    except Refused:
        return None
    root = Path(os.path.realpath(top))
    rel = repo_relative(root, path)
    head = read_head(root) if rel is not None else None
    if rel is None or head is None:
        return None
    window = max_commits or DEFAULT_MAX_COMMITS
    return ColdPlan(root, rel, head, window, min(window, FIRST_PAGE))


class EarlyLog:
    """The first page's first `git log` started on a thread at once (it waits for the isolation probe and reads the
    repository's config first), so it runs while this thread imports the rest; the page then reads its output.
    Any other query, or the same one again, goes to git."""

    def __init__(self, git: GitRepository, paths: tuple[str, ...], limit: int, revision: str):
        self.git = git
        self.query: tuple[tuple[str, ...], int, str] | None = (paths, limit, revision)
        self.output = b""
        self.error: GitError | None = None
        self.done = threading.Event()
        threading.Thread(target=self._read, name="nagent-first-query", daemon=True).start()

    def _read(self) -> None:
        assert self.query is not None
        paths, limit, revision = self.query
        try:
            self.output = b"".join(self.git.log_paths(paths, limit, revision))
        except GitError as exc:
            self.error = exc
        finally:
            self.done.set()

    def log_paths(self, paths: Iterable[str], limit: int, revision: str = "HEAD") -> Iterable[bytes]:
        if self.query != (tuple(paths), limit, revision):
            return self.git.log_paths(paths, limit, revision)
        self.query = None
        self.done.wait()
        if self.error is not None:
            raise self.error
        return (self.output,)


def _text(view: HistoryView, window: int) -> str:
    """As operations/history.history_result's FileHistory prints through render_history_text (rates rounded to
    four places there first, so the percentages agree)."""
    from nagent_lsp.history import render

    text = render.history_text(
        view.file,
        view.repository,
        [(render.iso(c.time), c.hash[:7], c.author, view.text_for(c)) for c in view.commits],
        [(a.commits, a.name, a.email) for a in view.authors],
        [(r.path, r.count, round(r.rate, 4), r.level) for r in view.coedits.rows],
    )
    partial = not view.complete and len(view.commits) < window
    return render.partial_noted(text, render.history_markdown(view), partial)


def _defaults_hold(repo_config: Path) -> bool:
    """No source sets a key the answer reads, and every config file is one the general path reads cleanly."""
    for path in (user_config_path(), repo_config):
        if not path.is_file():
            continue  # (settings.read_config_file: a missing file is no source)
        import json  # only when a config file exists

        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        if not isinstance(data, dict):
            return False
        if any(k in READ_KEYS or k.split(".", 1)[0] in READ_KEYS for k in data):
            return False
    return True


def _has_history_state(cache: Path) -> bool:
    try:
        with os.scandir(cache) as entries:
            return any(
                e.name.startswith(INDEX_NAME[0]) and e.name.endswith(INDEX_NAME[1]) or e.name == SUMMARIES
                for e in entries
            )
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: let the general path say what it makes of it


def _has_pending_change(txn: Path) -> bool:
    """A change set's folder store/transaction.recover would look at (it leaves `recovered-*` folders alone)."""
    try:
        with os.scandir(txn) as entries:
            return any(e.is_dir() and not e.name.startswith("recovered-") for e in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True
