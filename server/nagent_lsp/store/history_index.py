"""The history index file: a header frame, then segments appended one HEAD move at a time.

What is in a frame is history.index's business (columns of commits); this module only frames them on disk:
`length (4 bytes LE) | crc32 (4 bytes LE) | payload`. Why frames appended to one file rather than a JSON rewritten
on every HEAD move: a move adds a few hundred bytes, so it costs a few hundred bytes of I/O and one fsync, not a
rewrite of the whole history (0.3–0.45 s at 200k commits with the old JSON, ~2 s projected at 1M, holding the GIL);
and the columns load with `array.frombytes` instead of building millions of Python objects from JSON.

Crash safety: a reader keeps the frames up to the first one whose length or checksum does not hold (a torn append
loses only itself); the next append truncates that tail first. A rewrite (`write_frames`: first build, compaction)
goes through the atomic temp-file-and-rename. Two servers on one state root: an append checks that the file is still
the size its writer last saw; when another process changed it meanwhile, the append is refused (the caller
rewrites the file from memory — it is a cache, the last writer wins).

Memory (issue 29): the index file is read through a read-only memory map (`map_frames`), so a frame is a view
of the mapping, not a copy (a 150 MB index at 1M commits is never held twice while it is decoded); a frame is
written from its parts as they lie in memory (`write_frames` takes each frame as a sequence of buffers), its checksum
computed part by part, so a rewrite never joins the whole index into one bytes object either.
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from nagent_lsp.store.atomic import atomic_write_parts

Buffer = bytes | bytearray | memoryview

_HEAD = 8
MAX_FRAME = 1 << 31


def _frame(payload: Buffer) -> bytes:
    return len(payload).to_bytes(4, "little") + zlib.crc32(payload).to_bytes(4, "little") + bytes(payload)


def read_frames(path: Path) -> tuple[list[bytes], int] | None:
    """The intact frames of the file and the size they end at; None when there is no file."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    frames, end = _intact(memoryview(data))
    return [bytes(f) for f in frames], end


def map_frames(path: Path) -> tuple[list[memoryview], int] | None:
    """`read_frames` without reading the file into memory: the frames are views of a read-only memory map of it,
    which lives as long as they do (release them when done: a big index is not held twice while it is decoded)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return [], 0
            # MAP_POPULATE: the pages are mapped in one go (the whole file is read: every frame's checksum)
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            data = memoryview(mmap.mmap(handle.fileno(), 0, flags=flags, prot=mmap.PROT_READ))
    except (OSError, ValueError):
        return None
    return _intact(data)


def _intact(data: memoryview) -> tuple[list[memoryview], int]:
    frames: list[memoryview] = []
    pos = 0
    while pos + _HEAD <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "little")
        crc = int.from_bytes(data[pos + 4 : pos + 8], "little")
        end = pos + _HEAD + length
        if end > len(data):
            break
        payload = data[pos + _HEAD : end]
        if zlib.crc32(payload) != crc:
            break
        frames.append(payload)
        pos = end
    return frames, pos


def write_frames(path: Path, frames: Sequence[Buffer | Sequence[Buffer]]) -> int:
    """Replace the file atomically (store.atomic: temp file, fsync, rename) with these frames; returns its size. A frame
    is one buffer or a sequence of buffers written one after the other (never joined: see the module's docstring)."""
    path = Path(path)

    def parts() -> Iterator[Buffer]:
        for frame in frames:
            pieces = [frame] if isinstance(frame, bytes | bytearray | memoryview) else frame
            length, crc = 0, 0
            for piece in pieces:
                length += memoryview(piece).nbytes
                crc = zlib.crc32(piece, crc)
            if length >= MAX_FRAME:
                raise ValueError(f"{path}: a history index frame of {length} bytes is over the format's limit")
            yield length.to_bytes(4, "little") + crc.to_bytes(4, "little")
            yield from pieces

    return atomic_write_parts(path, parts()).st_size


def append_frame(path: Path, payload: bytes, expected_size: int) -> int | None:
    """Append one frame where the intact data ends (`expected_size`, as read or written last) and fsync; returns
    the new size, or None when the file is not the one expected (missing, or changed by another process)."""
    if len(payload) >= MAX_FRAME:
        return None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < expected_size:
            return None
        if size > expected_size:
            # a torn frame of ours (a crash mid-append) or someone else's append: only a torn tail may be dropped
            os.lseek(fd, expected_size, os.SEEK_SET)
            tail = os.read(fd, size - expected_size)
            if _has_intact_frame(tail):
                return None
            os.ftruncate(fd, expected_size)
        frame = _frame(payload)
        os.lseek(fd, expected_size, os.SEEK_SET)
        view = memoryview(frame)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        return expected_size + len(frame)
    except OSError:
        return None
    finally:
        os.close(fd)


def _has_intact_frame(data: bytes) -> bool:
    if len(data) < _HEAD:
        return False
    size = int.from_bytes(data[:4], "little")
    return _HEAD + size <= len(data) and zlib.crc32(data[_HEAD : _HEAD + size]) == int.from_bytes(data[4:8], "little")


def remove(path: Path) -> None:
    """Delete a cache file (e.g. an index in an older format), ignoring one that is already gone."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        pass
    except OSError:
        pass
