"""The attribution ledger: which nagent run wrote which lines (issue 27), per user, under `<state root>/attribution/`
(ignored by git like proposals: store/root.py).

- `ledger.jsonl`: one JSON object per line, appended with one `write` on an O_APPEND descriptor and fsynced, so a
  record is whole or (a crash mid-write) a torn last line the reader drops. `run` records say who wrote lines:
  the trace id, conversation, file id, turn, the request's first line, model, agent, time and the 1-based line
  ranges the run produced in the file; `override` records count lines the user rewrote afterwards.
- `tracks/<digest>.json`: per file, the text as last seen (one short hash per line) and which run owns each
  line. Rewritten atomically; it is what follows the user's edits and what a commit's blob is matched against.

Never any conversation text beyond the request's first line, which the conversation holds anyway.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

import attrs

from nagent_lsp.store.atomic import atomic_write_text

log = logging.getLogger("nagent_lsp")

FOLDER = "attribution"
LEDGER = "ledger.jsonl"
TRACKS = "tracks"
HASH = 12  # hex digits per line hash: a collision needs 2^24 lines in one file


def line_hash(line: str) -> str:
    return hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=HASH // 2).hexdigest()


@attrs.frozen
class RunRecord:
    """One applied run's lines in one file. `path` is the file (absolute); `target` the file whose conversation
    it is (a run also writes other files); `lines` 1-based inclusive ranges in the text as applied."""

    trace: str
    conversation: str
    conversationPath: str
    fileId: str
    target: str
    path: str
    turn: int | None
    conversationLine: int | None
    request: str
    model: str
    agent: str | None
    time: int
    lines: list[list[int]]
    tool: str = "nagent"


@attrs.define
class Track:
    """A file as last seen: `hashes` one per line, `owners` the trace that wrote each line (None: not nagent's)."""

    hashes: list[str]
    owners: list[str | None]

    def encode(self, path: str) -> str:
        runs: list[list[object]] = []
        for owner in self.owners:
            if runs and runs[-1][1] == owner:
                runs[-1][0] = int(str(runs[-1][0])) + 1
            else:
                runs.append([1, owner])
        return json.dumps({"path": path, "hashes": "".join(self.hashes), "owners": runs}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Track | None:
        try:
            data = json.loads(text)
            hashes_text = data["hashes"]
            hashes = [hashes_text[i : i + HASH] for i in range(0, len(hashes_text), HASH)]
            owners: list[str | None] = []
            for count, owner in data["owners"]:
                owners += [owner if isinstance(owner, str) else None] * int(count)
        except (ValueError, KeyError, TypeError) as exc:
            log.info("an attribution track is unreadable, ignored: %s", exc)
            return None
        if len(owners) != len(hashes):
            return None
        return cls(hashes, owners)


class Ledger:
    """One state root's ledger and tracks. Thread-safe; the ledger is read incrementally (only what was appended
    since the last read)."""

    def __init__(self, state_root: Path):
        self.folder = state_root / FOLDER
        self.path = self.folder / LEDGER
        self.lock = threading.RLock()
        self._runs: dict[str, list[RunRecord]] = {}  # trace -> its records (one per file it wrote)
        self._overridden: dict[str, int] = {}
        self._proposed: dict[tuple[str, str], tuple[str, str | None]] = {}  # (conversation, request) -> model, agent
        self._tracks: dict[str, tuple[tuple[int, int], Track | None]] = {}  # path -> (file stamp, track)
        self._offset = 0
        self._inode: int | None = None

    # -- the ledger ----------------------------------------------------------------------------------------------
    def append(self, record: dict[str, object]) -> None:
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self.lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def add_run(self, record: RunRecord) -> None:
        self.append({"type": "run", **attrs.asdict(record)})

    def add_override(self, trace: str, path: str, count: int, when: int) -> None:
        self.append({"type": "override", "trace": trace, "path": path, "count": count, "time": when})

    def runs(self) -> dict[str, list[RunRecord]]:
        """Every run recorded, by trace."""
        with self.lock:
            self._read_new()
            return self._runs

    def overridden(self, trace: str) -> int:
        with self.lock:
            self._read_new()
            return self._overridden.get(trace, 0)

    @property
    def proposed(self) -> dict[tuple[str, str], tuple[str, str | None]]:
        """The model and agent of runs whose change became a proposal, by (conversation, request)."""
        with self.lock:
            self._read_new()
            return self._proposed

    def _read_new(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._runs, self._overridden, self._offset, self._inode = {}, {}, 0, st.st_ino
            self._proposed = {}
        if st.st_size == self._offset:
            return
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            data = handle.read(st.st_size - self._offset)
        end = data.rfind(b"\n") + 1  # a torn last line (a crash mid-append) is left for no one
        self._offset += end
        for raw in data[:end].splitlines():
            self._take(raw)

    def _take(self, raw: bytes) -> None:
        try:
            value = json.loads(raw)
            kind = value.pop("type")
            if kind == "run":
                record = RunRecord(**value)
                self._runs.setdefault(record.trace, []).append(record)
            elif kind == "proposed":
                self._proposed[(value["conversation"], value["request"])] = (value["model"], value.get("agent"))
            elif kind == "override":
                self._overridden[value["trace"]] = self._overridden.get(value["trace"], 0) + int(value["count"])
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.info("skipping an unreadable attribution record in %s: %s", self.path, exc)

    # -- tracks --------------------------------------------------------------------------------------------------
    def _track_file(self, path: str) -> Path:
        digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:24]
        return self.folder / TRACKS / f"{digest}.json"

    def track(self, path: str) -> Track | None:
        try:
            text = self._track_file(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return Track.decode(text)

    def track_cached(self, path: str) -> Track | None:
        """`track`, kept in memory until the file changes (a hover reads it at the cost of a stat). The object is
        the same while the file is: callers may cache what they compute from it by its id."""
        try:
            st = os.stat(self._track_file(path))
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            return None
        with self.lock:
            cached = self._tracks.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        track = self.track(path)
        with self.lock:
            if len(self._tracks) > 256:
                self._tracks.clear()
            self._tracks[path] = (stamp, track)
        return track

    def save_track(self, path: str, track: Track) -> None:
        atomic_write_text(self._track_file(path), track.encode(path), 0o600)

    def tracked_paths(self) -> list[str]:
        """Every file a track is kept for (read from the tracks themselves)."""
        out = []
        try:
            entries = list((self.folder / TRACKS).iterdir())
        except OSError:
            return []
        for entry in entries:
            if entry.suffix != ".json":
                continue
            try:
                out.append(str(json.loads(entry.read_text(encoding="utf-8"))["path"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    # -- the last HEAD notes were written for, per repository -----------------------------------------------------
    def synced_head(self, repo: str) -> str | None:
        try:
            value = json.loads((self.folder / "heads.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        head = value.get(repo) if isinstance(value, dict) else None
        return head if isinstance(head, str) else None

    def set_synced_head(self, repo: str, head: str) -> None:
        with self.lock:
            try:
                value = json.loads((self.folder / "heads.json").read_text(encoding="utf-8"))
                if not isinstance(value, dict):
                    value = {}
            except (OSError, ValueError):
                value = {}
            value[repo] = head
            atomic_write_text(self.folder / "heads.json", json.dumps(value), 0o600)
