"""File summaries on disk: `<state root>/cache/file-summaries/`, one JSON file per (prompt version, content hash)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nagent_lsp.store.atomic import atomic_write_text

PROMPT_VERSION = "1"  # bump when the summary prompts change so old cached summaries are not reused
CACHE_SUBDIR = "file-summaries"


class FileSummaryCache:
    """JSON files under `<state root>/cache/file-summaries/`, one per (prompt version, content hash)."""

    def __init__(self, cache_dir: Path):
        self.dir = cache_dir / CACHE_SUBDIR

    def _path(self, kind: str, sha: str) -> Path:
        return self.dir / f"{kind}-v{PROMPT_VERSION}-{sha}.json"

    def get(self, kind: str, sha: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(kind, sha).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or damaged: summarise again
        return data if isinstance(data, dict) and isinstance(data.get("summary"), str) else None

    def put(self, kind: str, sha: str, data: dict[str, Any]) -> None:
        stamped = {**data, "createdAt": datetime.now(UTC).isoformat()}
        atomic_write_text(self._path(kind, sha), json.dumps(stamped, indent=2, ensure_ascii=False) + "\n")
