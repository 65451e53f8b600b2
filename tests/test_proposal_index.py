"""The pending proposals of a state root, kept in memory (store/proposals.py `ProposalIndex`): a code action on a
workspace with a thousand resolved proposals on disk reads none of them, and changes made by another process (the
CLI) are seen."""

from __future__ import annotations

import builtins
import json
import os
import pathlib
from pathlib import Path

import pytest

from nagent_lsp.operations.code_actions import offers
from nagent_lsp.operations.session import Session
from nagent_lsp.store import proposals

TEXT = "".join(f"line {i} = {i}\n" for i in range(40))


def proposal(number: int, target: Path, status: str = "pending") -> dict:
    new = TEXT.replace("line 3 = 3", "line 3 = 'three'")
    return {
        "version": 1,
        "id": f"p20250101T{number:06d}Z-{number:08x}",
        "createdAt": "2025-01-01T00:00:00Z",
        "status": status,
        "request": "x",
        "conversation": {"path": "c", "fileId": "f"},
        "target": str(target),
        "files": [
            {
                "uri": target.as_uri(),
                "path": str(target),
                "created": False,
                "baseText": TEXT,
                "newText": new,
                "hunks": [
                    {
                        "id": "h1",
                        "start": 3,
                        "end": 4,
                        "oldText": "line 3 = 3\n",
                        "newText": "line 3 = 'three'\n",
                        "status": "pending" if status == "pending" else "accepted",
                    }
                ],
            }
        ],
    }


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file under a proposals folder opened for reading, however it is read."""
    seen: list[str] = []
    real_open, real_read_text, real_read_bytes = builtins.open, pathlib.Path.read_text, pathlib.Path.read_bytes
    real_os_open = os.open

    def note(path: object) -> None:
        if "/proposals/" in str(path):
            seen.append(str(path))

    def counted_open(file, mode="r", *args, **kwargs):
        if "r" in mode and not isinstance(file, int):
            note(file)
        return real_open(file, mode, *args, **kwargs)

    def counted_read_text(self, *args, **kwargs):
        note(self)
        return real_read_text(self, *args, **kwargs)

    def counted_read_bytes(self):
        note(self)
        return real_read_bytes(self)

    def counted_os_open(path, flags, *args, **kwargs):
        # The bounded readers open with os.open (a folder opened to fsync a write is no read).
        if not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and not os.path.isdir(path):
            note(path)
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counted_open)
    monkeypatch.setattr(os, "open", counted_os_open)
    monkeypatch.setattr(pathlib.Path, "read_text", counted_read_text)
    monkeypatch.setattr(pathlib.Path, "read_bytes", counted_read_bytes)
    return seen


def test_code_actions_read_no_resolved_proposal(workspace: Path, reads: list[str]) -> None:
    target = workspace / "mod.py"
    target.write_text(TEXT)
    root = workspace / ".nagent"
    for number in range(1000):  # resolved long ago: a folder each, as `save` leaves them (no `pending` mark)
        stale = proposal(number, target, status="applied")
        folder = proposals.folder(root, stale["id"])
        folder.mkdir(parents=True)
        (folder / proposals.PROPOSAL_FILE).write_text(json.dumps(stale))
        (folder / proposals.PATCH_FILE).write_text("")
    pending = proposal(1000, target)
    proposals.create(root, pending, "")
    session = Session(workspace_folders=[workspace])
    lines = TEXT.splitlines(keepends=True)
    reads.clear()

    def review_titles() -> list[str]:
        return [o.title for o in offers(session, target.as_uri(), target, lines, (3, 0), (3, 0)) if "change" in o.title]

    assert review_titles() == [
        "nagent: accept this change",
        "nagent: reject this change",
        "nagent: accept all proposed changes",
        "nagent: reject all proposed changes",
    ]
    assert [Path(r).parent.name for r in reads] == [pending["id"]]  # the pending one, once
    reads.clear()
    for _ in range(3):
        assert len(review_titles()) == 4
    assert reads == []  # later requests answer from memory


def test_changes_by_another_process_are_seen(workspace: Path, reads: list[str]) -> None:
    target = workspace / "mod.py"
    target.write_text(TEXT)
    root = workspace / ".nagent"
    index = proposals.ProposalIndex(root)
    first = proposal(1, target)
    proposals.create(root, first, "")  # written by another process: not through this index
    assert [p.id for p in index.pending()] == [first["id"]]
    reads.clear()
    assert [p.id for p in index.pending()] == [first["id"]] and reads == []
    second = proposal(2, target)
    proposals.create(root, second, "")
    assert [p.id for p in index.pending()] == [first["id"], second["id"]]
    resolved = {**first, "status": "discarded"}
    proposals.save(root, resolved)  # the CLI resolved it
    assert not (proposals.folder(root, first["id"]) / proposals.PENDING_MARK).exists()
    assert [p.id for p in index.pending()] == [second["id"]]
    reads.clear()
    index.pending()
    assert reads == []
    index.save(proposals.parse({**second, "status": "applied"}))  # through the index: known at once, nothing read
    assert index.pending() == [] and reads == []
