"""`<state root>/proposals/<id>/`: a change set awaiting review (DESIGN §9) — `proposal.json` and `change.patch`.

A proposal is data: written atomically, read back by any server (it survives a restart) or the CLI. The JSON
keeps each file's base and proposed text and its hunks with their review status; `operations/review.py` decides
what that means. Ids are `p<UTC time>-<random>`: safe as folder names, sorted by creation.

While any hunk of a proposal is pending its folder also holds an empty `pending` file: finding the pending
proposals among thousands of resolved ones takes a directory listing and a stat each, not reading every
`proposal.json`. A proposal folder is made whole under a temporary name and renamed into place, so a folder with
a proposal's name and no `pending` file is resolved (resolving is final). `ProposalIndex` keeps one state root's
pending proposals in memory and re-reads a file only when its stamp changed (another process — the CLI — wrote it).

Provenance (DESIGN §12): a clone can bring a `proposals/` folder, so a proposal is only believed when it carries
this user's MAC (`store.provenance`, domain "proposal") over its canonical JSON (every field but `mac`, keys
sorted, no spaces, ASCII). The MAC is the file's first field: a shipped proposal without one is refused after
reading its first line. A foreign or tampered proposal is never returned (`read` says why: `Rejected`), never
rewritten, never deleted; `ProposalIndex.unreported` hands each one out once for the caller to report. A proposal
that verifies is then parsed strictly (`ProposalRecord`, through the strict converter): a malformed one is refused
with one message naming the file and the field. Where its paths may point is the caller's rule, checked on use
(`operations/review.py`): a MAC proves who wrote the file, not that the paths in it are still safe.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import attrs
import cattrs

from nagent_lsp.config.convert import Between, Invalid, converter, describe_value, problems, to_wire
from nagent_lsp.store import provenance
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.files import FileTooLarge, NotRegularFile

PROPOSALS = "proposals"
PROPOSAL_FILE = "proposal.json"
PATCH_FILE = "change.patch"
PENDING_MARK = "pending"
MAC_KIND = "proposal"
# A proposal of a file at maxFileBytes (50 MiB) holds its base and new text and the hunks' texts: a few times that.
PROPOSAL_MAX_BYTES = 256 * 1024 * 1024
_ID = re.compile(r"p[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")
# What `_json` writes first: `{` then the MAC. Anything else is no proposal of ours, refused unread.
_MAC_PREFIX = re.compile(rb'\{\s*"mac": "[0-9a-f]{64}",')
_PREFIX_BYTES = 96


def new_id() -> str:
    return f"p{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def valid_id(proposal_id: str) -> bool:
    return bool(_ID.fullmatch(proposal_id))


def folder(state_root: Path, proposal_id: str) -> Path:
    return state_root / PROPOSALS / proposal_id


# -- the shape of a proposal, checked strictly ------------------------------------------------------------------
class AnyText(str):
    """A text field that may be empty (a hunk's old text, an empty file): the converter's `str` refuses ""."""


Count = Annotated[int, Between(0, 1 << 40)]
HunkStatus = Literal["pending", "accepted", "rejected", "conflict"]


@attrs.frozen
class HunkRecord:
    id: str
    start: Count
    end: Count
    oldText: AnyText
    newText: AnyText
    status: HunkStatus


@attrs.frozen
class FileRecord:
    uri: str
    path: str
    created: bool
    baseText: AnyText
    newText: AnyText
    hunks: list[HunkRecord]


@attrs.frozen
class ConversationRecord:
    path: str
    fileId: AnyText = AnyText("")


@attrs.frozen
class ProposalRecord:
    version: int
    id: str
    createdAt: str
    status: Literal["pending", "applied", "discarded"]
    request: AnyText
    conversation: ConversationRecord
    target: str
    files: list[FileRecord]
    resolvedAt: str | None = None


def _any_text(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {describe_value(value)}")
    return value


_strict = converter.copy()
_strict.register_structure_hook(AnyText, _any_text)


def check_shape(data: Any) -> str | None:
    """None when `data` is a well-formed proposal; else "field: what is wrong" for the first problem."""
    lists = _not_a_list(data)
    if lists is not None:
        return f"{lists}: expected a list"
    try:
        record = _strict.structure(data, ProposalRecord)
    except (cattrs.BaseValidationError, Invalid, KeyError, TypeError, ValueError, AttributeError) as exc:
        found = next(problems(exc, "", ProposalRecord), None)
        return f"{found[0] or 'proposal'}: {found[1]}" if found else "not a proposal"
    for file in record.files:
        for hunk in file.hunks:
            if hunk.end < hunk.start:
                return f"hunk {hunk.id}: end {hunk.end} is before start {hunk.start}"
    every = [h.id for f in record.files for h in f.hunks]
    if len(set(every)) != len(every):
        return "files: two hunks share an id"
    return None


def _not_a_list(data: Any) -> str | None:
    """The first list field holding something else (the converter would iterate a string's characters)."""
    if not isinstance(data, dict):
        return None
    files = data.get("files")
    if not isinstance(files, list):
        return "files" if "files" in data else None
    for position, file in enumerate(files):
        if isinstance(file, dict) and "hunks" in file and not isinstance(file["hunks"], list):
            return f"files.{position}.hunks"
    return None


def parse(data: dict[str, Any]) -> ProposalRecord:
    """A proposal `read` returned (its shape already checked) as its typed record."""
    return _strict.structure(data, ProposalRecord)


Proposal = ProposalRecord | dict[str, Any]  # a record, or a proposal's JSON as written (tests forge malformed ones)


def _data(proposal: Proposal) -> dict[str, Any]:
    """The JSON object of a proposal: a record's fields (None left out: `resolvedAt` while pending)."""
    if isinstance(proposal, ProposalRecord):
        data: dict[str, Any] = to_wire(proposal)
        return data
    return proposal


# -- writing ----------------------------------------------------------------------------------------------
def canonical(proposal: dict[str, Any]) -> bytes:
    """What the MAC covers: every field but `mac`, in one spelling whatever the file's indentation."""
    body = {k: v for k, v in proposal.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _json(proposal: Proposal) -> str:
    """The file's text: the MAC first (see `_MAC_PREFIX`), then the proposal as it reads best."""
    body = {k: v for k, v in _data(proposal).items() if k != "mac"}
    signed = {"mac": provenance.mac(MAC_KIND, canonical(body)), **body}
    return json.dumps(signed, indent=1, ensure_ascii=False) + "\n"


def create(state_root: Path, proposal: Proposal, patch: str) -> Path:
    """Write a new (pending) proposal: its folder is made whole under a temporary name, then renamed into place.
    ProvenanceError (nothing written) when the per-user secret cannot be used."""
    data = _data(proposal)
    text = _json(data)
    where = folder(state_root, data["id"])
    building = where.with_name(f".{data['id']}.creating")
    atomic_write_text(building / PATCH_FILE, patch)
    atomic_write_text(building / PROPOSAL_FILE, text)
    (building / PENDING_MARK).touch()
    try:
        os.rename(building, where)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return where


def save(state_root: Path, proposal: Proposal) -> Path:
    """Rewrite a proposal's JSON (its hunks' statuses); once it is no longer pending its `pending` mark goes."""
    data = _data(proposal)
    text = _json(data)
    where = folder(state_root, data["id"])
    atomic_write_text(where / PROPOSAL_FILE, text)
    if data.get("status") != "pending":
        (where / PENDING_MARK).unlink(missing_ok=True)
    return where


def saved_files(state_root: Path, proposal: ProposalRecord) -> list[tuple[Path, str | None]]:
    """What `save` writes, for a caller that writes it in one transaction with the change it records
    (`store.transaction`): the JSON, and None (delete) for the `pending` mark once the proposal is resolved."""
    where = folder(state_root, proposal.id)
    files: list[tuple[Path, str | None]] = [(where / PROPOSAL_FILE, _json(proposal))]
    if proposal.status != "pending":
        files.append((where / PENDING_MARK, None))
    return files


# -- reading ----------------------------------------------------------------------------------------------
@attrs.frozen
class Rejected:
    """A proposal file that is not used: `foreign` (no valid MAC of this user: a clone brought it, or it was
    edited) or ours but malformed. `reason` is one line naming the file and, when malformed, the field."""

    id: str
    path: Path
    reason: str
    foreign: bool


class _NoMac(Exception):
    """The file does not start with a MAC: not read further."""


def _read_signed(path: Path) -> bytes:
    """The file's bytes (at most PROPOSAL_MAX_BYTES), opened once without following a link or blocking on a FIFO;
    `_NoMac` after its first bytes when it does not start as `_json` starts a proposal."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, "not a regular file")
        if st.st_size > PROPOSAL_MAX_BYTES:
            raise FileTooLarge(path, st.st_size, PROPOSAL_MAX_BYTES)
        chunks = [os.read(fd, _PREFIX_BYTES)]
        if not _MAC_PREFIX.match(chunks[0]):
            raise _NoMac
        total = len(chunks[0])
        while chunk := os.read(fd, min(1 << 20, PROPOSAL_MAX_BYTES + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > PROPOSAL_MAX_BYTES:
                raise FileTooLarge(path, total, PROPOSAL_MAX_BYTES)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read(state_root: Path, proposal_id: str) -> dict[str, Any] | Rejected | None:
    """The proposal (without its `mac`), `Rejected` saying why it is not used, or None when there is none."""
    if not valid_id(proposal_id):
        return None
    path = folder(state_root, proposal_id) / PROPOSAL_FILE

    def foreign(why: str) -> Rejected:
        return Rejected(proposal_id, path, f"{path}: {why}", foreign=True)

    try:
        data = json.loads(_read_signed(path).decode("utf-8"))
    except _NoMac:
        return foreign("not made by this server for this user (it carries no MAC of yours)")
    except FileNotFoundError:
        return None
    except (NotRegularFile, FileTooLarge) as exc:
        return foreign(f"not used: {exc}")
    except OSError as exc:
        return foreign(f"cannot be read ({exc.strerror or exc})")
    except (ValueError, RecursionError):
        return foreign("not valid JSON")
    if not isinstance(data, dict):
        return foreign("not a JSON object")
    try:
        genuine = provenance.verify(MAC_KIND, canonical(data), data.get("mac"))
    except provenance.ProvenanceError as exc:
        return foreign(f"cannot be checked: {exc.message}")
    except (TypeError, ValueError, RecursionError):
        genuine = False
    if not genuine:
        return foreign("not made by this server for this user, or changed since (its MAC does not verify)")
    data.pop("mac", None)
    problem = check_shape(data)
    if problem is None and data["id"] != proposal_id:
        problem = f"id: {data['id']!r} is not the proposal's folder {proposal_id}"
    if problem is not None:
        return Rejected(proposal_id, path, f"{path}: field {problem}", foreign=False)
    return data


def load(state_root: Path, proposal_id: str) -> dict[str, Any] | None:
    """The proposal, or None when there is none under that id or it is not used (`read` says why)."""
    found = read(state_root, proposal_id)
    return found if isinstance(found, dict) else None


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
    a resolved one nothing at all. Writes go through `create`/`save` here, which update the index as they write.
    A pending-marked proposal that is not used (`Rejected`) is kept aside, re-read only when its file changes,
    and handed out once by `unreported`."""

    def __init__(self, state_root: Path):
        self.state_root = state_root
        self._lock = threading.Lock()
        self._resolved: set[str] = set()  # ids known to be resolved (or not proposals): never looked at again
        self._pending: dict[str, tuple[Stamp, ProposalRecord]] = {}
        self._rejected: dict[str, tuple[Stamp, Rejected]] = {}
        self._reported: set[str] = set()

    def pending(self) -> list[ProposalRecord]:
        """Every pending proposal, oldest first (frozen records: a change is a new record, saved)."""
        with self._lock:
            found = self._scan()
            return [self._pending[i][1] for i in found if i in self._pending]

    def rejected(self, proposal_id: str) -> Rejected | None:
        """Why a pending-marked proposal under that id is not used (None: it is used, or there is none)."""
        with self._lock:
            self._scan()
            known = self._rejected.get(proposal_id)
            return known[1] if known else None

    def unreported(self) -> list[Rejected]:
        """The proposals not used that were not handed out before (each once per index, so once per server)."""
        with self._lock:
            self._scan()
            fresh = [r for i, (_s, r) in sorted(self._rejected.items()) if i not in self._reported]
            self._reported.update(r.id for r in fresh)
            return fresh

    def create(self, proposal: ProposalRecord, patch: str) -> None:
        with self._lock:
            create(self.state_root, proposal, patch)
            self._remember(proposal)

    def save(self, proposal: ProposalRecord) -> None:
        with self._lock:
            save(self.state_root, proposal)
            self._remember(proposal)

    def saved(self, proposal: ProposalRecord) -> None:
        """The proposal was written (`saved_files`) by a transaction: remember it as `save` would."""
        with self._lock:
            self._remember(proposal)

    def _scan(self) -> list[str]:
        found = ids(self.state_root)
        for gone in set(self._pending) - set(found):
            del self._pending[gone]
        for gone in set(self._rejected) - set(found):
            del self._rejected[gone]
        for proposal_id in found:
            if proposal_id not in self._resolved:
                self._refresh(proposal_id)
        return found

    def _remember(self, proposal: ProposalRecord) -> None:
        stamp = self._stamp(proposal.id)
        self._rejected.pop(proposal.id, None)
        if proposal.status == "pending" and stamp is not None:
            self._pending[proposal.id] = (stamp, proposal)
        else:
            self._pending.pop(proposal.id, None)
            self._resolved.add(proposal.id)

    def _stamp(self, proposal_id: str) -> Stamp | None:
        try:
            st = os.lstat(folder(self.state_root, proposal_id) / PROPOSAL_FILE)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self, proposal_id: str) -> None:
        known = self._pending.get(proposal_id)
        refused = self._rejected.get(proposal_id)
        if known is None and refused is None and not (folder(self.state_root, proposal_id) / PENDING_MARK).exists():
            self._resolved.add(proposal_id)
            return
        stamp = self._stamp(proposal_id)
        if (known is not None and stamp == known[0]) or (refused is not None and stamp == refused[0]):
            return
        proposal = read(self.state_root, proposal_id)
        if isinstance(proposal, Rejected):
            self._pending.pop(proposal_id, None)
            self._rejected[proposal_id] = (stamp or (0, 0, 0), proposal)
            return
        self._rejected.pop(proposal_id, None)
        if proposal is None or proposal.get("status") != "pending":
            self._pending.pop(proposal_id, None)
            if stamp is not None:  # resolved (a mark a crash left between the writes of `save`)
                self._resolved.add(proposal_id)
            return
        self._pending[proposal_id] = (stamp or (0, 0, 0), parse(proposal))
