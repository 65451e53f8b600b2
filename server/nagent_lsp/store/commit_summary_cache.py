"""Commit summaries cache: one line per (commit, path), written once, read forever.

Stored as JSON under the state root's cache/ folder. A (commit, path) the model was asked about is recorded even when
the reply had no line for it (as ""), so it is never paid for again; the subject stands in. Writes merge with what is
on disk first, so two servers sharing a state root do not drop each other's entries.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from nagent_lsp.store.atomic import atomic_write_text

VERSION = 1


def _key(sha: str, path: str) -> str:
    return f"{sha}:{path}"


class CommitSummaryCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, str] = self._read()
        self.version = 0  # bumped on every change, so renderers can cache by it

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)}

    def get(self, sha: str, path: str) -> str | None:
        """The summary, or None when there is none (never asked, or asked and no line came back)."""
        return self._entries.get(_key(sha, path)) or None

    def known(self, sha: str, path: str) -> bool:
        return _key(sha, path) in self._entries

    def missing(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [p for p in pairs if _key(*p) not in self._entries]

    def record(self, asked: list[tuple[str, str]], answers: dict[tuple[str, str], str]) -> None:
        with self._lock:
            merged = self._read()
            merged.update(self._entries)
            for sha, path in asked:
                line = " ".join(str(answers.get((sha, path)) or "").split())
                merged[_key(sha, path)] = line
            self._entries = merged
            self.version += 1
            atomic_write_text(
                self.path,
                json.dumps({"version": VERSION, "entries": merged}, ensure_ascii=False, indent=0, sort_keys=True),
            )

    def __len__(self) -> int:
        return len(self._entries)
