"""`<state root>/proposals/<id>/`: a change set awaiting review (DESIGN §9) — `proposal.json` and `change.patch`.

A proposal is data: written atomically, read back by any server (it survives a restart) or the CLI. The JSON
keeps each file's base and proposed text and its hunks with their review status; `operations/review.py` decides
what that means. Ids are `p<UTC time>-<random>`: safe as folder names, sorted by creation.

While any hunk of a proposal is pending its folder also holds an empty `pending` file: finding the pending
proposals among thousands of resolved ones takes a directory listing and a stat each, not reading every
`proposal.json`. A proposal folder is made whole under a temporary name and renamed into place, so a folder with
a proposal's name and no `pending` file is resolved (resolving is final). `ProposalIndex` keeps one state root's
pending proposals in memory and re-reads a file only when its stamp changed (another process — the CLI — wrote it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nagent_lsp.store.atomic import atomic_write_text

PROPOSALS = "proposals"
PROPOSAL_FILE = "proposal.json"
PATCH_FILE = "change.patch"
PENDING_MARK = "pending"
_ID = re.compile(r"p[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")


def new_id() -> str:
    return f"p{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def valid_id(proposal_id: str) -> bool:
    return bool(_ID.fullmatch(proposal_id))


def folder(state_root: Path, proposal_id: str) -> Path:
    return state_root / PROPOSALS / proposal_id


def create(state_root: Path, proposal: dict[str, Any], patch: str) -> Path:
    """Write a new (pending) proposal: its folder is made whole under a temporary name, then renamed into place."""
    where = folder(state_root, proposal["id"])
    building = where.with_name(f".{proposal['id']}.creating")
    atomic_write_text(building / PATCH_FILE, patch)
    atomic_write_text(building / PROPOSAL_FILE, _json(proposal))
    (building / PENDING_MARK).touch()
    try:
        os.rename(building, where)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return where


def save(state_root: Path, proposal: dict[str, Any]) -> Path:
    """Rewrite a proposal's JSON (its hunks' statuses); once it is no longer pending its `pending` mark goes."""
    where = folder(state_root, proposal["id"])
    atomic_write_text(where / PROPOSAL_FILE, _json(proposal))
    if proposal.get("status") != "pending":
        (where / PENDING_MARK).unlink(missing_ok=True)
    return where


def _json(proposal: dict[str, Any]) -> str:
    return json.dumps(proposal, indent=1, ensure_ascii=False) + "\n"


def load(state_root: Path, proposal_id: str) -> dict[str, Any] | None:
    """The proposal, or None when there is none under that id (or its file is not a proposal)."""
    if not valid_id(proposal_id):
        return None
    try:
        data = json.loads((folder(state_root, proposal_id) / PROPOSAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
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


Stamp = tuple[int, int, int]  # (inode, mtime_ns, size) of a proposal.json: an atomic rewrite changes the inode


class ProposalIndex:
    """The pending proposals of one state root, in memory; thread-safe (code actions ask from worker threads).

    `pending()` lists the proposals folder once; a folder seen for the first time costs a stat of its `pending`
    mark (and one read when it is pending), a pending proposal a stat of its JSON (re-read only when it changed);
    a resolved one nothing at all. Writes go through `create`/`save` here, which update the index as they write."""

    def __init__(self, state_root: Path):
        self.state_root = state_root
        self._lock = threading.Lock()
        self._resolved: set[str] = set()  # ids known to be resolved (or not proposals): never looked at again
        self._pending: dict[str, tuple[Stamp, dict[str, Any]]] = {}

    def pending(self) -> list[dict[str, Any]]:
        """Every pending proposal, oldest first. The dicts are the index's own: read them, never change them."""
        with self._lock:
            found = ids(self.state_root)
            for gone in set(self._pending) - set(found):
                del self._pending[gone]
            for proposal_id in found:
                if proposal_id not in self._resolved:
                    self._refresh(proposal_id)
            return [self._pending[i][1] for i in found if i in self._pending]

    def create(self, proposal: dict[str, Any], patch: str) -> None:
        with self._lock:
            create(self.state_root, proposal, patch)
            self._remember(proposal)

    def save(self, proposal: dict[str, Any]) -> None:
        with self._lock:
            save(self.state_root, proposal)
            self._remember(proposal)

    def _remember(self, proposal: dict[str, Any]) -> None:
        stamp = self._stamp(proposal["id"])
        if proposal.get("status") == "pending" and stamp is not None:
            self._pending[proposal["id"]] = (stamp, proposal)
        else:
            self._pending.pop(proposal["id"], None)
            self._resolved.add(proposal["id"])

    def _stamp(self, proposal_id: str) -> Stamp | None:
        try:
            st = (folder(self.state_root, proposal_id) / PROPOSAL_FILE).stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self, proposal_id: str) -> None:
        known = self._pending.get(proposal_id)
        if known is None and not (folder(self.state_root, proposal_id) / PENDING_MARK).exists():
            self._resolved.add(proposal_id)
            return
        stamp = self._stamp(proposal_id)
        if known is not None and stamp == known[0]:
            return
        proposal = load(self.state_root, proposal_id)
        if proposal is None or proposal.get("status") != "pending":
            self._pending.pop(proposal_id, None)
            if stamp is not None:  # resolved (a mark a crash left between the writes of `save`), or not a proposal
                self._resolved.add(proposal_id)
            return
        self._pending[proposal_id] = (stamp or (0, 0, 0), proposal)
