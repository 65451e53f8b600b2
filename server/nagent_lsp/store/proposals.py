"""`<state root>/proposals/<id>/`: a change set awaiting review (DESIGN §9) — `proposal.json` and `change.patch`.

A proposal is data: written atomically, read back by any server (it survives a restart) or the CLI. The JSON
keeps each file's base and proposed text and its hunks with their review status; `operations/review.py` decides
what that means. Ids are `p<UTC time>-<random>`: safe as folder names, sorted by creation.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nagent_lsp.store.atomic import atomic_write_text

PROPOSALS = "proposals"
PROPOSAL_FILE = "proposal.json"
PATCH_FILE = "change.patch"
_ID = re.compile(r"p[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")


def new_id() -> str:
    return f"p{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def valid_id(proposal_id: str) -> bool:
    return bool(_ID.fullmatch(proposal_id))


def folder(state_root: Path, proposal_id: str) -> Path:
    return state_root / PROPOSALS / proposal_id


def save(state_root: Path, proposal: dict[str, Any], patch: str | None = None) -> Path:
    """Write (or rewrite) a proposal; `patch`, when given, is its unified diff (`change.patch`)."""
    where = folder(state_root, proposal["id"])
    if patch is not None:
        atomic_write_text(where / PATCH_FILE, patch)
    atomic_write_text(where / PROPOSAL_FILE, json.dumps(proposal, indent=1, ensure_ascii=False) + "\n")
    return where


def load(state_root: Path, proposal_id: str) -> dict[str, Any] | None:
    """The proposal, or None when there is none under that id (or its file is not a proposal)."""
    if not valid_id(proposal_id):
        return None
    try:
        data = json.loads((folder(state_root, proposal_id) / PROPOSAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("id") != proposal_id or not isinstance(data.get("files"), list):
        return None
    return data


def ids(state_root: Path) -> list[str]:
    """Every proposal id under the state root, oldest first."""
    try:
        names = [p.name for p in (state_root / PROPOSALS).iterdir()]
    except OSError:
        return []
    return sorted(n for n in names if valid_id(n))
