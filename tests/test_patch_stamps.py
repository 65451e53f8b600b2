"""`nagent-lsp patch` does not read a segment whose file still has the stamp the index recorded (inode, size, mtime:
git's stat check, issue 29); any edit of a segment is still seen, and a racy stamp is never trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.test_patch_streamed import BODY, _patch, _split


def _in_place(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` (same length) inside the file, in place: same inode, same size."""
    assert len(old) == len(new)
    text = path.read_text()
    assert old in text
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text.replace(old, new, 1))


def _set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(path.stat().st_atime_ns, mtime_ns))


def test_same_size_edits_are_seen_before_and_after_a_patch(workspace: Path) -> None:
    split, segs = _split(workspace)
    index = json.loads(Path(split["indexPath"]).read_text())
    assert all(len(s["stamp"]) == 3 for s in index["segments"])  # the split stamps every segment
    _in_place(segs[1], "return", "RETURN")  # same size, same inode: only the mtime tells
    result = _patch(workspace, split["indexPath"])
    assert result["applied"] is True
    assert (workspace / "big.py").read_text() == "".join(s.read_text() for s in segs) != BODY
    # Stamps written by the patch hold the same: another same-size edit, of another segment and the same one.
    _in_place(segs[3], "return ", "return-")
    _in_place(segs[1], "return", "Return")
    second = _patch(workspace, split["indexPath"])
    assert second["applied"] is True
    assert (workspace / "big.py").read_text() == "".join(s.read_text() for s in segs)


def test_a_segment_whose_stamp_holds_is_not_read(workspace: Path) -> None:
    split, segs = _split(workspace)
    index_path = Path(split["indexPath"])
    # Every stamp settled: the index file is newer than each segment's write.
    _set_mtime(index_path, index_path.stat().st_mtime_ns + 10_000_000_000)
    # Segment 1 changed behind the stamp's back (content, not inode, size or mtime): a stamped file is not read.
    original = segs[1].read_text()
    mtime = segs[1].stat().st_mtime_ns
    _in_place(segs[1], "return", "RETURN")
    _set_mtime(segs[1], mtime)
    segs[4].write_text(segs[4].read_text() + "# an edit\n")
    result = _patch(workspace, split["indexPath"])
    assert result["applied"] is True
    texts = [s.read_text() for s in segs]
    assert (workspace / "big.py").read_text() == "".join([texts[0], original, *texts[2:]])
    assert "RETURN" not in (workspace / "big.py").read_text()


def test_a_racy_stamp_is_not_trusted(workspace: Path) -> None:
    split, segs = _split(workspace)
    index_path = Path(split["indexPath"])
    # The same change behind the stamp, but the index is not newer than the stamps: they are racy, so read.
    mtime = segs[1].stat().st_mtime_ns
    _in_place(segs[1], "return", "RETURN")
    _set_mtime(segs[1], mtime)
    _set_mtime(index_path, mtime)
    result = _patch(workspace, split["indexPath"])
    assert result["applied"] is True
    assert (workspace / "big.py").read_text() == "".join(s.read_text() for s in segs) != BODY
