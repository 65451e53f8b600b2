"""The byte stream under JSON-RPC: `Content-Length` framing that survives what a client may send.

pygls' reader keeps waiting for a `Content-Length` line that matches exactly; one header block without it (or a
body shorter or longer than declared) shifts every later message, and the server never answers again. The
`Framer` here resynchronises instead: it finds the next `Content-Length:` header even when it is glued to the
end of stray bytes, hands those stray bytes back as `Junk` (the server tries them as a message, else answers
-32700), and skips a body larger than `MAX_BODY` without holding it in memory.

`Framer` is pure (bytes in, events out) so it can be tested and fuzzed without a process; `serve` drives it from
stdin or a socket and gives each event to the protocol (lsp/server.py).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

MAX_BODY = 256 * 1024 * 1024  # bytes in one message: a 50 MiB file (maxFileBytes) JSON-escaped fits with room to spare
MAX_HEADER_LINE = 8 * 1024  # a header line longer than this is junk; only its tail is kept to find a header in it
_TAIL = 64  # bytes kept from a long junk line: enough for "Content-Length: <digits>\r"
READ_SIZE = 64 * 1024

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,15})[ \t]*\r?$", re.IGNORECASE)
_OTHER_HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]*[ \t]*:[^\r\n]*\r?")
_GLUED_HEADER = re.compile(rb"content-(?:length|type)[ \t]*:", re.IGNORECASE)  # LSP's two headers, anywhere


@dataclass(frozen=True)
class Frame:
    """One message body, exactly as many bytes as its header declared."""

    body: bytes


@dataclass(frozen=True)
class Junk:
    """Bytes outside any frame (at most MAX_BODY of them are kept); `reason` says why they were not a frame."""

    data: bytes
    reason: str


@dataclass(frozen=True)
class Oversized:
    """A body larger than MAX_BODY, skipped without being kept."""

    length: int


Event = Frame | Junk | Oversized


class Framer:
    """Feed bytes with `feed`, take events with `next_event` until it returns None (more bytes needed)."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self.max_body = max_body
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a newline
        self._length: int | None = None  # Content-Length of the header block being read
        self._headers_seen = False  # a header line other than Content-Length in this block
        self._body: int | None = None  # in a body: its length
        self._skip = 0  # bytes of an oversized body still to drop
        self._skipped = 0
        self._junk = bytearray()  # stray bytes waiting to be reported
        self._junk_reason = ""

    def feed(self, data: bytes) -> None:
        self._buf += data

    def unread(self, data: bytes) -> None:
        """Put bytes back in front of the stream (a body that held the start of the next message)."""
        self._buf[:0] = data
        self._scanned = 0

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_event(self) -> Event | None:
        while True:
            if self._skip:
                dropped = min(self._skip, len(self._buf))
                del self._buf[:dropped]
                self._skip -= dropped
                self._skipped += dropped
                if self._skip:
                    return None
                length, self._skipped = self._skipped, 0
                return Oversized(length)
            if self._body is not None:
                if len(self._buf) < self._body:
                    return None
                body = bytes(self._buf[: self._body])
                del self._buf[: self._body]
                self._body = None
                return Frame(body)
            newline = self._buf.find(b"\n", self._scanned)
            if newline < 0:
                if len(self._buf) > MAX_HEADER_LINE:  # junk without a newline: keep only a tail that may hold a header
                    cut = len(self._buf) - _TAIL
                    self._add_junk(bytes(self._buf[:cut]), "bytes outside any message")
                    del self._buf[:cut]
                self._scanned = len(self._buf)
                if self._junk and not self._buf:
                    return self._take_junk()
                return None
            line = bytes(self._buf[:newline])
            del self._buf[: newline + 1]
            self._scanned = 0
            event = self._header_line(line)
            if event is not None:
                return event

    def flush(self) -> Event | None:
        """At end of input: whatever stray bytes are left."""
        if self._buf and self._body is None and not self._skip:
            self._add_junk(bytes(self._buf), "bytes outside any message")
            self._buf.clear()
        return self._take_junk() if self._junk else None

    # -- headers -------------------------------------------------------------------------------------

    def _header_line(self, line: bytes) -> Event | None:
        if not line.strip():
            if self._length is not None:
                return self._start_body()
            if self._headers_seen:
                self._headers_seen = False
                self._add_junk(b"", "a message header without Content-Length")
            return self._take_junk() if self._junk else None
        match = _CONTENT_LENGTH.search(line)
        if match is not None:
            if match.start() > 0:  # stray bytes glued in front of a header: report them, keep the header
                self._add_junk(line[: match.start()], "bytes outside any message")
            self._length = int(match.group(1))
            return None
        if _OTHER_HEADER.fullmatch(line):
            self._headers_seen = True
            return None
        glued = _GLUED_HEADER.search(line, 1)
        if glued is not None:  # a body without its header, glued to the next message's first header
            self._length = None
            self._headers_seen = False
            self._add_junk(line[: glued.start()], "bytes outside any message")
            return self._header_line(line[glued.start() :])
        # Not a header: whatever header block was being read is broken.
        self._length = None
        self._headers_seen = False
        self._add_junk(line + b"\n", "bytes outside any message")
        return None

    def _start_body(self) -> Event | None:
        length, self._length, self._headers_seen = self._length or 0, None, False
        if length > self.max_body:
            self._skip = length
        else:
            self._body = length  # 0 too: an empty body, which the protocol answers as a parse error
        return self._take_junk() if self._junk else None  # stray bytes first; the body comes next

    def _add_junk(self, data: bytes, reason: str) -> None:
        room = self.max_body - len(self._junk)
        if room > 0:
            self._junk += data[:room]
        if not self._junk_reason or reason != "bytes outside any message":
            self._junk_reason = reason

    def _take_junk(self) -> Junk:
        junk = Junk(bytes(self._junk), self._junk_reason)
        self._junk.clear()
        self._junk_reason = ""
        return junk


Handler = Callable[[Event], bytes | None]  # returns bytes to put back in front of the stream, if any


async def serve(read: Callable[[], Awaitable[bytes]], handle: Handler, stopped: Callable[[], bool]) -> None:
    """Read until end of input (or `stopped()`), handing every event to `handle`."""
    framer = Framer()
    while not stopped():
        event = framer.next_event()
        if event is None:
            chunk = await read()
            if not chunk:
                break
            framer.feed(chunk)
            continue
        again = handle(event)
        if again:
            framer.unread(again)
    if (last := framer.flush()) is not None and not stopped():
        handle(last)


def stdin_reader(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Chunks of a file descriptor, read in a thread of their own (a busy pool never delays reading)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nagent-stdin")

    def read() -> Awaitable[bytes]:
        return asyncio.get_running_loop().run_in_executor(pool, os.read, fd, READ_SIZE)

    return read
