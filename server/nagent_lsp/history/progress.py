"""Build progress as events for listeners: "begin" once a build is big enough to be worth showing, "report"s, then
one "end". The LSP layer turns them into `$/progress` without this package knowing about LSP."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from nagent_lsp.history.context import Counters
from nagent_lsp.history.index import IndexBuilder

log = logging.getLogger("nagent_lsp.history")

PROGRESS_EVERY = 0.5  # seconds between progress reports while building
PROGRESS_FROM = 1000  # a build shows progress once it has read this many commits (small ones finish unseen)


@dataclass(frozen=True)
class HistoryEvent:
    """What a listener hears: a build or load beginning, progressing and ending (state after it)."""

    kind: str  # "begin" | "report" | "end"
    title: str
    message: str
    commits: int | None = None
    state: str = "building"


class BuildProgress:
    """Listeners are called from the service's threads; a failing listener never breaks the build."""

    def __init__(self, counters: Counters):
        self.counters = counters
        self.listeners: list[Callable[[HistoryEvent], None]] = []
        self.shown = False  # a "begin" went out and its "end" has not

    def emit(self, kind: str, message: str, state: str, commits: int | None = None) -> None:
        if kind == "begin":
            if self.shown:
                return
            self.shown = True
        elif kind == "end":
            if not self.shown:
                return
            self.shown = False
        event = HistoryEvent(kind, "Indexing git history", message, commits, state)
        self.counters.events.append(kind)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - a listener must never break the build
                log.debug("history listener failed: %s", exc)

    def reporting(self, builder: IndexBuilder, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The build's stream, passed through, with a "begin" and then a "report" every PROGRESS_EVERY seconds."""
        last = 0.0
        for chunk in chunks:
            yield chunk
            if builder.count < PROGRESS_FROM:
                continue
            now = time.monotonic()
            if not self.shown:
                self.emit("begin", "reading git history", "building", builder.count)
            if now - last >= PROGRESS_EVERY:
                last = now
                self.emit("report", f"{builder.count:,} commits read", "building", builder.count)
