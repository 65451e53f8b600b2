"""Commit summaries: asked of the model in background batches, once ever per (commit, path), kept in the state root's
cache (store.commit_summary_cache) and, with `history.shareSummaries: notes`, read from and written to git notes
(history.summary_notes) first. Here too: the prompt, the reply parsing and the batch summariser (the chat call is
injected)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from nagent_lsp.config.settings import HistorySettings
from nagent_lsp.core.model import Message
from nagent_lsp.history.context import HistoryContext
from nagent_lsp.history.encoding import display, git_arg
from nagent_lsp.history.git import GitError
from nagent_lsp.history.summary_notes import SummaryNotes
from nagent_lsp.store.commit_summary_cache import CommitSummaryCache

if TYPE_CHECKING:
    from nagent_lsp.history.file_history import FileEntry

log = logging.getLogger("nagent_lsp.history")

# (commit hash, path at that commit, subject, diff excerpt) -> {(hash, path): one-line summary}
SummaryItem = tuple[str, str, str, str]
Summarizer = Callable[[list[SummaryItem]], dict[tuple[str, str], str]]

SUMMARY_LIMIT = 50  # newest commits of a file that get model summaries (older ones keep their subject)
SUMMARY_BATCH = 20  # commits per model request
EXCERPT_CHARS = 4000  # diff excerpt per commit sent to the model

# -- the model summariser (prompt + reply parsing); the chat call itself is injected ---------------------------------

SUMMARY_INSTRUCTIONS = (
    "You write one-line summaries of commits, for a developer about to edit one file. For each commit below, say in "
    "one short sentence (at most 20 words) what it changed in that file and, when the diff shows it, why. Use only "
    "what the subject and diff show; if the diff is missing or cut, summarise from the subject without guessing. "
    'Reply with JSON only: {"summaries": [{"commit": "<full hash>", "path": "<path>", "summary": "<sentence>"}]}'
)


def summary_prompt(items: list[SummaryItem]) -> list[Message]:
    sections = []
    for sha, path, subject, excerpt in items:
        sections.append(f"Commit: {sha}\nPath: {path}\nSubject: {subject}\nDiff:\n{excerpt or '(not available)'}")
    return [Message("system", SUMMARY_INSTRUCTIONS), Message("user", "\n\n---\n\n".join(sections))]


def parse_summary_reply(text: str, items: list[SummaryItem]) -> dict[tuple[str, str], str]:
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if start >= 0 < end else None
        except ValueError:
            data = None
    rows = data.get("summaries") if isinstance(data, dict) else data
    if not isinstance(rows, list):  # a reply cut at its cap: the rows that are whole still count
        rows = _whole_rows(body)
    if not isinstance(rows, list):
        return {}
    by_hash: dict[str, list[str]] = {}
    for sha, path, _s, _e in items:
        by_hash.setdefault(sha, []).append(path)
    out: dict[tuple[str, str], str] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        sha = str(row.get("commit") or "").strip().lower()
        summary = " ".join(str(row.get("summary") or "").split())
        if not sha or not summary:
            continue
        full = next((h for h in by_hash if h == sha or (len(sha) >= 7 and h.startswith(sha))), None)
        if full is None:
            continue
        path = str(row.get("path") or "")
        paths = by_hash[full]
        out[(full, path if path in paths else paths[0])] = summary
    return out


def _whole_rows(body: str) -> list[Any]:
    """The `{...}` objects of a reply whose JSON does not parse as a whole (cut at the output cap)."""
    rows = []
    for match in re.finditer(r"\{[^{}]*\}", body):
        try:
            rows.append(json.loads(match.group(0)))
        except ValueError:
            continue
    return rows


def make_model_summarizer(complete: Callable[[list[Message]], Any]) -> Summarizer:
    """`complete(messages)` returns a Reply (or text); exceptions propagate (the service records no summary). A
    reply cut at commitSummaryMaxTokens keeps the summaries it finished; the others keep their subject."""

    def summarize(items: list[SummaryItem]) -> dict[tuple[str, str], str]:
        reply = complete(summary_prompt(items))
        found = parse_summary_reply(getattr(reply, "text", reply) or "", items)
        if getattr(reply, "finish_reason", None) in ("length", "max_tokens"):
            log.warning(
                "commit summaries cut at commitSummaryMaxTokens: %d of %d kept (the rest keep their subject)",
                len(found),
                len(items),
            )
        return found

    return summarize


# -- asking for them: in the background, once per (commit, path) ----------------------------------------------------


class CommitSummaries:
    """The pairs in flight and those that failed this run are remembered under `ctx.lock` (a failed pair is not
    asked again until restart: its subject stands in); batches run one at a time in their own pool."""

    def __init__(self, ctx: HistoryContext, cache: CommitSummaryCache, summarizer: Summarizer | None = None):
        self.ctx = ctx
        self.cache = cache
        self.summarizer = summarizer
        self._summarizer_key: tuple[object, ...] | None = None
        self.share: SummaryNotes | None = None  # DESIGN §11: summaries also read from / written to git notes
        self._inflight: set[tuple[str, str]] = set()
        self._failed: set[tuple[str, str]] = set()
        self._futures: list[Future] = []
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-history-summary")

    def share_summaries(self, notes: bool) -> None:
        """`history.shareSummaries`: "notes" reads missing summaries from git notes before asking the model, and writes
        the model's to them (history.summary_notes); "off" does neither."""
        if notes and self.share is None:
            self.share = SummaryNotes(self.ctx.git)
        elif not notes:
            self.share = None

    def use_summarizer(self, key: tuple[object, ...], make: Callable[[], Summarizer | None]) -> None:
        """Install `make()` unless the summariser made for `key` (the settings objects it came from) is in place.
        Keys are compared by identity: settings objects are replaced on every reload, and an id can be reused."""
        previous = self._summarizer_key
        same = previous is not None and len(previous) == len(key)
        same = same and all(a is b for a, b in zip(previous or (), key, strict=True))
        if not same:
            self.summarizer = make()
            self._summarizer_key = key

    def request(self, entry: FileEntry, hs: HistorySettings) -> Future | None:
        """Ask the model, in the background, for the newest commits of this file that have no summary yet."""
        summarizer = self.summarizer
        if (summarizer is None and self.share is None) or not hs.summarize or self.ctx.closed:
            return None
        commits = entry.view.commits[:SUMMARY_LIMIT]
        wanted = [(c.hash, c.path) for c in commits]
        with self.ctx.lock:
            todo = [p for p in self.cache.missing(wanted) if p not in self._inflight and p not in self._failed]
            if not todo:
                return None
            self._inflight.update(todo)
        subjects = {(c.hash, c.path): c.subject for c in commits}
        names = sorted({git_arg(n) for n in entry.names} | {git_arg(c.raw_path) for c in commits if c.raw_path})
        future = self.pool.submit(self._summarize, summarizer, todo, subjects, names)
        with self.ctx.lock:
            self._futures = [f for f in self._futures if not f.done()] + [future]
        return future

    def wait(self, timeout: float | None = None) -> None:
        with self.ctx.lock:
            futures = list(self._futures)
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in futures:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.result(remaining)
            except Exception:  # noqa: BLE001 - timeouts and model failures are reported elsewhere
                return

    def missing(
        self, entry: FileEntry, limit: int = SUMMARY_LIMIT
    ) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str], list[str]]:
        """For a caller that summarises in its own thread (`summaries warm`): the newest `limit` commits of the file
        with no summary yet, their subjects, and the file's names (for the diffs)."""
        commits = entry.view.commits[:limit]
        todo = self.cache.missing([(c.hash, c.path) for c in commits])
        subjects = {(c.hash, c.path): c.subject for c in commits}
        names = sorted({git_arg(n) for n in entry.names} | {git_arg(c.raw_path) for c in commits if c.raw_path})
        return todo, subjects, names

    def summarize_now(self, todo: list[tuple[str, str]], subjects: dict, names: list[str]) -> None:
        """Summarise `todo` in the caller's thread (notes first when shared, then the model)."""
        self._summarize(self.summarizer, todo, subjects, names)

    def from_notes(self, entry: FileEntry, hs: HistorySettings) -> None:
        """In the caller's thread, without asking a model: the shared notes' summaries of the file's newest commits
        (a one-shot CLI shows what the team already paid for; the server does this in `request`)."""
        if self.share is None or not hs.summarize:
            return
        todo, _subjects, _names = self.missing(entry, SUMMARY_LIMIT)
        self.take_from_notes(todo)

    def take_from_notes(self, todo: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Take what the shared notes hold into the cache; returns what is still missing."""
        share = self.share
        if share is None or not todo:
            return todo
        try:
            self.ctx.counters.git_processes += 3
            found = share.lookup(todo)
        except GitError as exc:
            log.info("could not read shared summaries: %s", exc)
            return todo
        if found:
            self.cache.record(list(found), found)
        return [p for p in todo if p not in found]

    def _to_notes(self, answers: dict[tuple[str, str], str]) -> None:
        share = self.share
        if share is None or not answers:
            return
        try:
            self.ctx.counters.git_processes += 3
            share.add(answers)
        except GitError as exc:
            log.warning("could not write shared summaries to git notes: %s", exc)

    def _summarize(
        self, summarizer: Summarizer | None, todo: list[tuple[str, str]], subjects: dict, names: list[str]
    ) -> None:
        missing = self.take_from_notes(todo)
        with self.ctx.lock:
            self._inflight.difference_update(set(todo) - set(missing) if summarizer is not None else todo)
        if summarizer is None:
            return  # shared notes only: what they do not hold keeps its subject
        todo = missing
        for start in range(0, len(todo), SUMMARY_BATCH):
            batch = todo[start : start + SUMMARY_BATCH]
            try:
                excerpts = self._excerpts([sha for sha, _ in batch], names)
                items = [(sha, path, subjects.get((sha, path), ""), excerpts.get(sha, "")) for sha, path in batch]
                self.ctx.counters.summary_requests += 1
                answers = summarizer(items)
                if not isinstance(answers, dict):
                    raise TypeError("summarizer returned no mapping")
                self.cache.record(batch, answers)
                self._to_notes(answers)
            except Exception as exc:  # noqa: BLE001 - no summary is fine: the subject stands in
                log.warning("commit summaries failed: %s", exc)
                with self.ctx.lock:
                    self._failed.update(batch)
            finally:
                with self.ctx.lock:
                    self._inflight.difference_update(batch)

    def _excerpts(self, hashes: list[str], names: list[str]) -> dict[str, str]:
        self.ctx.counters.git_processes += 1
        data = b"".join(self.ctx.git.show_patches(hashes, names))
        out: dict[str, str] = {}
        for part in data.split(b"\x01"):
            if not part:
                continue
            sha, _, body = part.partition(b"\n")
            text = display(body).strip("\n")
            if len(text) > EXCERPT_CHARS:
                text = text[:EXCERPT_CHARS] + f"\n… ({len(text) - EXCERPT_CHARS} more characters not shown)"
            out[sha.decode("ascii", "replace").strip()] = text
        return out
