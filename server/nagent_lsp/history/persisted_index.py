"""The repository index on disk (`cache/history-<digest>.idx`): loaded once at start, then one segment appended per
HEAD move (a few hundred bytes), rewritten whole on the first build, when another process changed the file, or every
COMPACT_SEGMENTS appends. The framing is store.history_index's; what a segment holds is history.index's."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from nagent_lsp.history.context import Counters
from nagent_lsp.history.index import Marks, RepoIndex, release
from nagent_lsp.store import history_index as index_file

log = logging.getLogger("nagent_lsp.history")

COMPACT_SEGMENTS = 1000  # the index file is rewritten as one segment after this many appends (~0.1 s of load)


@dataclass(frozen=True)
class Segment:
    """What to write: the payload's parts (views of the index's columns: the index must not grow until they are
    written and released), the marks the file will hold after it, and whether it replaces the file."""

    parts: list[bytes | memoryview]
    marks: Marks
    whole: bool


class PersistedIndex:
    def __init__(self, path: Path, legacy_path: Path, counters: Counters):
        self.path = path
        self.legacy_path = legacy_path  # the JSON of format 1: removed, never loaded again
        self.counters = counters
        self.marks: Marks | None = None  # what the file holds; None: no file of ours yet
        self.size = 0
        self.segments = 0

    def load(self) -> RepoIndex | None:
        """The index the file holds, every length checked but not yet its ids: the caller runs `validate` (in the
        background, after the first answers) and drops the index if that fails. None: no file, or unreadable."""
        if self.legacy_path.exists():
            index_file.remove(self.legacy_path)
        found = index_file.map_frames(self.path)
        if found is None:
            return None
        frames, size = found
        try:
            index = RepoIndex.decode(frames, check=False)
        except (ValueError, KeyError, TypeError, OverflowError, IndexError) as exc:
            log.info("ignoring unreadable history index %s: %s", self.path, exc)
            return None
        finally:
            release(frames)  # the file's memory map goes with its last view
        self.marks = index.marks()
        self.size = size
        self.segments = max(0, len(frames) - 1)
        return index

    def segment(self, index: RepoIndex, rewrite: bool) -> Segment:
        """What the file lacks of `index` (under the service lock: the index must not change while encoded)."""
        since = self.marks
        whole = rewrite or since is None or self.segments >= COMPACT_SEGMENTS
        return Segment(index.segment_parts(Marks() if whole or since is None else since), index.marks(), whole)

    def write(self, index: RepoIndex, segment: Segment, lock: threading.RLock) -> None:
        """Append the segment, or rewrite the file when the append is refused (another process changed it). The
        caller holds the index still (its update lock) until this returns: the parts are views of its columns,
        streamed to the file as they are (a whole index is never joined into one bytes object: issue 29)."""
        parts = segment.parts
        try:
            size = None
            if not segment.whole:
                size = index_file.append_frame(self.path, b"".join(parts), self.size)
                if size is not None:
                    self.segments += 1
                    self.counters.appends += 1
                else:
                    release(parts)
                    with lock:
                        parts = index.segment_parts(Marks())
            if size is None:
                size = index_file.write_frames(self.path, [RepoIndex.header(), parts])
                self.segments = 1
                self.counters.rewrites += 1
            self.size = size
            self.marks = segment.marks
        except (OSError, ValueError) as exc:
            log.warning("cannot write history index %s: %s", self.path, exc)
        finally:
            release(parts)
