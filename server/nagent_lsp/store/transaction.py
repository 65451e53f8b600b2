"""A multi-file change written all or nothing (DESIGN §9): the CLI's change sets, with their patch and proposal record.

`commit(state_root, writes)` works in `<state root>/txn/<id>/`, never in the source tree (where `git add -A` would
pick a temp file up):

1. every new content is written to a temp file in that folder and fsynced (`<n>.new`); a target on another file
   system gets its temp next to it instead (a rename cannot cross file systems), named in `intent.json` first;
2. `journal.json` is written atomically: each target, its temp, the sha256 of its old and new content. Writing it
   is the commit point;
3. each temp is renamed over its target (a `None` content deletes the target), the folders are fsynced, and the
   transaction's folder is removed.

`recover(state_root)` (every CLI command and the server's start) finishes what a killed process left: a folder
with a journal is rolled forward (every temp still there renamed into place), one without is rolled back (its temps
deleted; no target was touched yet). So after a SIGKILL at any point either every file changed or none did. A
target the user changed since the crash (neither its old nor its new content) is not overwritten: the new content
is kept next to the journal's folder as `<state root>/txn/recovered-<id>/` and the recovery says so.

A process holds an exclusive `flock` on its transaction's `lock` file while it commits: recovery skips a folder
whose lock is held (another process is committing it right now).

`NAGENT_LSP_TEST_CRASH_AFTER=k` makes `commit` exit the process at once (`os._exit`, as a SIGKILL would) after k
steps (a temp written, the journal, a rename or deletion, the cleanup; 0: before any): only the crash tests set it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

import attrs

from nagent_lsp.store.atomic import atomic_write_text, fsync_dir
from nagent_lsp.store.root import TXN

log = logging.getLogger("nagent_lsp")

JOURNAL = "journal.json"
INTENT = "intent.json"
LOCK = "lock"
CRASH_ENV = "NAGENT_LSP_TEST_CRASH_AFTER"
UNLOCKED_GRACE = 3600.0  # seconds: a folder without a lock file this young is being made by a running process


class Digest(Protocol):
    """A hashlib object (sha256): what `Write.hashed_head` carries."""

    def update(self, data: bytes | memoryview, /) -> None: ...

    def copy(self) -> Digest: ...

    def hexdigest(self) -> str: ...


@attrs.frozen
class Write:
    """One file of a transaction: its new content, or None to delete it (`mode`: a new file's permissions).

    A large file may be streamed instead: `chunks` (data None) gives its new content piece by piece while the temp
    is written and hashed, so the whole of it is never held; `old_sha256`, the target's hash as the caller read and
    checked it, spares hashing the target again, and `old_signature` (`signature` of the target taken before that
    read) lets the rename go ahead without hashing it once more when the target's inode, size and mtime are still
    those: any write since changes them, and the target is then hashed and checked as always."""

    path: Path
    data: bytes | None
    mode: int | None = None
    chunks: Callable[[], Iterable[bytes | memoryview]] | None = None
    old_sha256: str | None = None
    old_signature: tuple[int, int, int, int] | None = None
    # (n, digest): the sha256 of the first n bytes `chunks` yields, already computed (a patch's unchanged head is
    # the old file's, whose hash the caller took): a copy of it takes the rest, those n bytes are written unhashed.
    hashed_head: tuple[int, Digest] | None = None

    @property
    def deletes(self) -> bool:
        return self.data is None and self.chunks is None


@attrs.frozen
class _Entry:
    target: str
    temp: str | None  # None: delete the target
    old: str | None  # sha256 of the target's content before, None when it did not exist
    new: str | None  # sha256 of the new content, None for a deletion


class _Steps:
    """The test hook: counts steps and exits the process after NAGENT_LSP_TEST_CRASH_AFTER of them."""

    def __init__(self, hooked: bool = True) -> None:
        value = os.environ.get(CRASH_ENV, "") if hooked else ""
        self.left = int(value) if value.isdigit() else None

    def check(self) -> None:
        if self.left == 0:
            os._exit(137)

    def step(self) -> None:
        if self.left is not None:
            self.left -= 1
            self.check()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CHUNK = 1 << 20


def _hash_of(path: Path) -> str | None:
    """The sha256 of a file's content, read a chunk at a time (a 50 MB file is never held whole)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def _write_content(handle: BinaryIO, write: Write) -> str:
    """Write one Write's new content to `handle`; its sha256."""
    if write.chunks is None:
        assert write.data is not None
        handle.write(write.data)
        return _digest(write.data)
    skip, digest = (write.hashed_head[0], write.hashed_head[1].copy()) if write.hashed_head else (0, hashlib.sha256())
    for chunk in write.chunks():
        handle.write(chunk)
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        digest.update(memoryview(chunk)[skip:] if skip else chunk)
        skip = 0
    return digest.hexdigest()


def signature(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, size, mtime in ns) of a file, None when it does not exist: equal signatures taken before and
    after mean nobody wrote it in between."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _device(path: Path) -> int | None:
    """The device of the nearest existing folder at or above `path`."""
    for candidate in (path, *path.parents):
        try:
            return os.stat(candidate).st_dev
        except OSError:
            continue
    return None


def commit(state_root: Path, writes: Sequence[Write]) -> list[str | None]:
    """Write every file of `writes` or none (see the module's docstring); OSError when it could not start, in which
    case nothing changed. A failure after the commit point is finished by the next `recover`. Returns the sha256 of
    each write's new content (None for a deletion)."""
    if not writes:
        return []
    steps = _Steps()
    steps.check()
    folder = state_root / TXN / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entries = _prepare(folder, writes, steps)
        except BaseException:
            _roll_back(folder)
            raise
        atomic_write_text(folder / JOURNAL, json.dumps([attrs.asdict(e) for e in entries], indent=1) + "\n")
        steps.step()
        seen = {str(w.path): w.old_signature for w in writes if w.old_signature is not None and w.old_sha256}
        _roll_forward(folder, entries, steps, seen)
    finally:
        os.close(lock)
    return [e.new for e in entries]


def _prepare(folder: Path, writes: Sequence[Write], steps: _Steps) -> list[_Entry]:
    """Every temp written and fsynced; nothing outside `folder` touched but temps of other-device targets."""
    own = _device(folder)
    outside = {i: w for i, w in enumerate(writes) if not w.deletes and _device(w.path.parent) != own}
    temps = {i: w.path.with_name(f".{w.path.name}.{folder.name[-8:]}.tmp") for i, w in outside.items()}
    if temps:
        atomic_write_text(folder / INTENT, json.dumps([str(t) for t in temps.values()]) + "\n")
    entries = []
    for i, write in enumerate(writes):
        old = write.old_sha256 or _hash_of(write.path)
        if write.deletes:
            entries.append(_Entry(str(write.path), None, old, None))
            continue
        temp = temps.get(i, folder / f"{i}.new")
        temp.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            new = _write_content(handle, write)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            mode = write.path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = write.mode if write.mode is not None else 0o644
        os.chmod(temp, mode)
        entries.append(_Entry(str(write.path), str(temp), old, new))
        steps.step()
    fsync_dir(folder)
    return entries


def _roll_forward(
    folder: Path, entries: Sequence[_Entry], steps: _Steps, seen: dict[str, tuple[int, int, int, int]] | None = None
) -> list[str]:
    """Rename every temp still there over its target (delete the targets to delete); returns what it could not do.
    `seen`: targets whose content the committing process hashed itself, by their signature then."""
    problems: list[str] = []
    touched: set[Path] = set()
    for entry in entries:
        target = Path(entry.target)
        known = (seen or {}).get(entry.target)
        current = entry.old if known is not None and signature(target) == known else _hash_of(target)
        if entry.temp is None:
            if current is not None and current != entry.old:
                problems.append(f"{target} changed since; not deleted")
            else:
                target.unlink(missing_ok=True)
            touched.add(target.parent)
            steps.step()
            continue
        temp = Path(entry.temp)
        if not temp.exists():
            continue  # renamed before the crash
        if current not in (entry.old, entry.new):
            kept = _keep(folder, temp, target)
            problems.append(f"{target} changed since the change was made; its new content is kept at {kept}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, target)
        touched.add(target.parent)
        steps.step()
    for parent in touched:
        fsync_dir(parent)
    (folder / JOURNAL).unlink(missing_ok=True)
    steps.step()
    shutil.rmtree(folder, ignore_errors=True)
    return problems


def _keep(folder: Path, temp: Path, target: Path) -> Path:
    kept = folder.with_name(f"recovered-{folder.name}") / target.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    os.replace(temp, kept)
    return kept


def _roll_back(folder: Path) -> None:
    """Before the journal no target changed: delete the temps (those next to other-device targets too)."""
    try:
        outside = json.loads((folder / INTENT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        outside = []
    for temp in outside if isinstance(outside, list) else []:
        if isinstance(temp, str):
            Path(temp).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def _journal(folder: Path) -> list[_Entry] | None:
    """The journal's entries; None when there is none (or it cannot be read: it is written atomically, so a
    journal that is there is whole — anything else was not written by `commit`)."""
    try:
        raw = json.loads((folder / JOURNAL).read_text(encoding="utf-8"))
        return [_Entry(**item) for item in raw]
    except (OSError, ValueError, TypeError):
        return None


def recover(state_root: Path) -> list[str]:
    """Finish or undo every transaction a killed process left in `state_root`; returns one line per transaction
    (and per problem) for the log. Folders whose lock another process holds are left alone."""
    base = state_root / TXN
    try:
        folders = sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("recovered-"))
    except OSError:
        return []
    said: list[str] = []
    for folder in folders:
        try:
            said += _recover_one(folder)
        except OSError as exc:
            said.append(f"could not recover the interrupted change {folder}: {exc}")
    return said


def _recover_one(folder: Path) -> list[str]:
    try:
        lock = os.open(folder / LOCK, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if time.time() - folder.stat().st_mtime < UNLOCKED_GRACE:
            return []  # being made right now
        shutil.rmtree(folder, ignore_errors=True)
        return [f"removed the empty interrupted change {folder.name}"]
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # another process is committing it
        entries = _journal(folder)
        if entries is None:
            _roll_back(folder)
            # Killed before its journal (no target touched yet) or while removing its folder (all done).
            return [f"removed the temp files of an interrupted change ({folder.name}); no file was left half changed"]
        problems = _roll_forward(folder, entries, _Steps(hooked=False))
        return [f"finished an interrupted change of {len(entries)} file(s) ({folder.name})", *problems]
    finally:
        os.close(lock)


def recover_all(roots: Sequence[Path]) -> None:
    """`recover` every root, logging what was done (a start never fails on it)."""
    for root in dict.fromkeys(roots):
        try:
            for line in recover(root):
                log.warning("%s", line)
        except OSError as exc:
            log.info("could not look for interrupted changes in %s: %s", root, exc)
