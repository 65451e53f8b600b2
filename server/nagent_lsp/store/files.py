"""Reading a file from disk: the one bounded reader every port, operation and tool uses.

Only regular files are read, never more than a limit: `os.stat` decides before anything is opened (a FIFO,
a device such as /dev/zero or /dev/stdin, a socket or a directory is refused without opening it), the open is
non-blocking and re-checked with `fstat` (the name may have been swapped for a FIFO in between), and at most
`limit + 1` bytes are read (a file that grew past the limit after the stat is refused, not truncated).
Text is the file's exact bytes decoded as UTF-8, never newline-translated, so CRLF and a missing final
newline are treated the same everywhere.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from nagent_lsp.core.errors import UserError

CHUNK = 1 << 20


class NotRegularFile(UserError):
    """The path is a directory, FIFO, device or socket: reading it could block or never end."""

    def __init__(self, path: Path, kind: str):
        super().__init__(f"{path} is {kind}, not a regular file; only regular files are read")
        self.path = path
        self.kind = kind


class FileTooLarge(UserError):
    def __init__(self, path: Path, size: int, limit: int):
        super().__init__(f"{path} is {size} bytes, more than the limit of {limit} bytes")
        self.path = path
        self.size = size
        self.limit = limit


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for check, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if check(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def read_regular_bytes(path: Path | str, limit: int | None, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them. Symlinks are followed unless
    `follow_symlinks` is false (then a link is refused as "a symbolic link").

    Raises FileNotFoundError, NotRegularFile, FileTooLarge or another OSError; never blocks on a special file."""
    path = Path(path)
    st = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, file_kind(st.st_mode))
    if limit is not None and st.st_size > limit:
        raise FileTooLarge(path, st.st_size, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and exc.errno == errno.ELOOP:  # swapped for a link after the stat
            raise NotRegularFile(path, "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise NotRegularFile(path, file_kind(st.st_mode))
        cap = None if limit is None else limit + 1
        chunks: list[bytes] = []
        total = 0
        # The whole file in one read of its size (one chunk: joining it makes no second copy of a large file; a
        # buffer no larger than the file: os.read allocates all of it), then small reads to see the end.
        want = st.st_size + 1 if st.st_size else CHUNK
        while cap is None or total < cap:
            asked = want if cap is None else min(want, cap - total)
            chunk = os.read(fd, asked)
            want = 1 << 16
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < asked:
                break  # a regular file reads short only at its end
    finally:
        os.close(fd)
    if limit is not None and total > limit:  # it grew after the stat
        raise FileTooLarge(path, total, limit)
    return b"".join(chunks)


def decode_text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_disk_text(path: Path, missing_ok: bool = True, limit: int | None = None) -> str:
    """The file's exact text ("" when it does not exist and `missing_ok`); a UserError when it is not a regular
    file, larger than `limit` or not UTF-8."""
    try:
        raw = read_regular_bytes(path, limit)
    except FileNotFoundError:
        if missing_ok:
            return ""
        raise UserError(f"file not found: {path}") from None
    except NotRegularFile as exc:
        if exc.kind == "a directory":
            raise UserError(f"not a file: {path}") from None
        raise
    return decode_text(Path(path), raw)
