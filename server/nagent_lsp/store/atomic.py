"""The one way every artifact reaches disk: temp file in the same folder, fsync, rename.

A crash mid-write leaves either the old file or the new one, never a truncated mix, and perhaps a temp file
(`.name.XXXXXXXX.tmp`, killed between create and rename): `remove_stale_temp_files` clears those at start-up.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path

TEMP_PREFIX, TEMP_SUFFIX = ".", ".tmp"
# Exactly what atomic_write_bytes makes: "." + target name + "." + mkstemp's 8 random characters + ".tmp".
_OUR_TEMP = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")
STALE_AFTER = 3600.0  # seconds: a temp file this old belongs to no write still running
MAX_CLEANUP_ENTRIES = 200_000  # directory entries looked at, at most, per state root


def atomic_write_bytes(path: Path | str, data: bytes, mode: int | None = None) -> Path:
    path = Path(path)
    atomic_write_stat(path, data, mode)
    return path


def atomic_write_stat(path: Path, data: bytes, mode: int | None = None) -> os.stat_result:
    """`atomic_write_bytes`, returning the new file's stat as written: taken before the rename, so a write by anyone
    else after it shows in the file's own stat (a split's segments are stamped with it)."""
    return atomic_write_parts(path, (data,), mode)


def atomic_write_parts(
    path: Path, parts: Iterable[bytes | bytearray | memoryview], mode: int | None = None
) -> os.stat_result:
    """`atomic_write_stat` of the parts written one after another, never joined: a big file (the history index) is
    not held twice in memory. An exception raised by `parts` leaves the old file as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_file(path)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            for part in parts:
                handle.write(part)
            handle.flush()
            os.fsync(handle.fileno())
            written = os.fstat(handle.fileno())
        if mode is None and path.exists():
            mode = path.stat().st_mode & 0o7777
        os.chmod(tmp, mode if mode is not None else 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)
    return written


_TEMP_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"  # mkstemp's


def _temp_file(path: Path) -> tuple[int, str]:
    """A new temp file beside `path`, named as `tempfile.mkstemp` would (`.name.XXXXXXXX.tmp`, 0600, created
    exclusively): without importing tempfile, which every CLI command would otherwise pay for at start."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = "".join(_TEMP_CHARS[b % len(_TEMP_CHARS)] for b in os.urandom(8))
        tmp = os.path.join(path.parent, f"{TEMP_PREFIX}{path.name}.{name}{TEMP_SUFFIX}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temp file name beside {path}")


def atomic_write_text(path: Path | str, text: str, mode: int | None = None) -> Path:
    # newline="" semantics: the text is written byte-for-byte, CRLF stays CRLF.
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def fsync_dir(directory: Path) -> None:
    # The rename itself is durable only once the directory entry is flushed.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_stale_temp_files(root: Path, older_than: float = STALE_AFTER, now: float | None = None) -> list[Path]:
    """Delete the temp files atomic writes left under `root` when killed mid-write; returns what was deleted.

    Only our own pattern (`.name.XXXXXXXX.tmp`), only regular files (never a symlink, never what one points to),
    only older than `older_than` seconds (a write in progress in another process is never touched); the walk
    does not follow symbolic links and stops after MAX_CLEANUP_ENTRIES entries."""
    removed: list[Path] = []
    limit = (time.time() if now is None else now) - older_than
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_CLEANUP_ENTRIES:
            break
        for name in files:
            if not _OUR_TEMP.fullmatch(name):
                continue
            candidate = Path(folder, name)
            try:
                info = candidate.lstat()
                if stat.S_ISREG(info.st_mode) and info.st_mtime < limit:
                    candidate.unlink()
                    removed.append(candidate)
            except OSError:
                continue
    return removed
