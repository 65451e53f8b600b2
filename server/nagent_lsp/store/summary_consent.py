"""The user's answers to "may this repository's commit diffs go to the summary model?" (issue 25), kept in the
user's own state, never the repository's: `~/.nagent/summary-consent.json` (mode 0600),
`{"version": 1, "repositories": {"<repository real path>": {"answer": "allow"|"deny", "endpoint": "<base URL>",
"model": "<model>", "at": "<ISO 8601>"}}}`. An answer holds for the endpoint it was given for: another endpoint
is asked about again. A file that does not parse is treated as holding no answer (and rewritten on the next one).
"""

from __future__ import annotations

import datetime
import json
import threading
from pathlib import Path
from typing import Literal

import attrs

from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.files import read_disk_text

CONSENT_FILE = "summary-consent.json"
MAX_CONSENT_FILE_BYTES = 4 * 1024 * 1024
Answer = Literal["allow", "deny"]

_lock = threading.Lock()


@attrs.frozen
class ConsentRecord:
    answer: Answer
    endpoint: str
    model: str
    at: str


class ConsentRecords:
    def __init__(self, home_root: Path):
        self.path = home_root / CONSENT_FILE

    def load(self) -> dict[str, ConsentRecord]:
        try:
            raw = json.loads(read_disk_text(self.path, limit=MAX_CONSENT_FILE_BYTES) or "{}")
        except (ValueError, OSError):
            return {}
        entries = raw.get("repositories") if isinstance(raw, dict) else None
        records: dict[str, ConsentRecord] = {}
        for key, value in (entries or {}).items() if isinstance(entries, dict) else ():
            if not isinstance(value, dict) or value.get("answer") not in ("allow", "deny"):
                continue
            endpoint, model, at = (value.get(name) for name in ("endpoint", "model", "at"))
            if isinstance(endpoint, str) and isinstance(model, str) and isinstance(at, str):
                records[str(key)] = ConsentRecord(value["answer"], endpoint, model, at)
        return records

    def get(self, repository: Path, endpoint: str) -> Answer | None:
        """The answer given for `repository` and this `endpoint`, if any."""
        record = self.load().get(str(repository))
        return record.answer if record is not None and record.endpoint == endpoint else None

    def record(self, repository: Path, endpoint: str, model: str, answer: Answer) -> None:
        with _lock:
            records = self.load()
            at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            records[str(repository)] = ConsentRecord(answer, endpoint, model, at)
            data = {"version": 1, "repositories": {k: attrs.asdict(v) for k, v in sorted(records.items())}}
            atomic_write_bytes(self.path, (json.dumps(data, indent=2) + "\n").encode("utf-8"), mode=0o600)
