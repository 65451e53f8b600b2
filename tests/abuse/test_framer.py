"""The Content-Length framing (lsp/transport.py) as pure bytes in, events out: whatever comes in between, every
well-framed message after it is found, however the stream is cut into chunks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nagent_lsp.lsp.transport import Frame, Framer, Junk, Oversized

pytestmark = pytest.mark.abuse


def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def events(stream: bytes, chunks: list[int] | None = None, max_body: int = 1 << 20) -> list[object]:
    framer = Framer(max_body=max_body)
    out: list[object] = []
    cuts = chunks or [len(stream)]
    at = 0
    for size in [*cuts, len(stream)]:
        framer.feed(stream[at : at + size])
        at += size
        while (event := framer.next_event()) is not None:
            out.append(event)
    framer.feed(stream[at:])
    while (event := framer.next_event()) is not None:
        out.append(event)
    if (last := framer.flush()) is not None:
        out.append(last)
    return out


def bodies(found: list[object]) -> list[bytes]:
    return [e.body for e in found if isinstance(e, Frame)]


MESSAGES = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "x", "params": {"t": "é" * i}}).encode() for i in range(5)]


def test_frames_with_and_without_content_type() -> None:
    stream = framed(MESSAGES[0]) + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + framed(MESSAGES[1])
    assert bodies(events(stream)) == MESSAGES[:2]


def test_header_names_are_case_insensitive_and_spaces_are_allowed() -> None:
    stream = b"content-length:%d\r\n\r\n" % len(MESSAGES[0]) + MESSAGES[0]
    stream += b"CONTENT-LENGTH :  %d \r\n\r\n" % len(MESSAGES[1]) + MESSAGES[1]
    assert bodies(events(stream)) == MESSAGES[:2]


def test_a_header_block_without_content_length_does_not_desynchronise() -> None:
    lost = b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + MESSAGES[0]
    found = events(lost + framed(MESSAGES[1]) + framed(MESSAGES[2]))
    assert bodies(found)[-2:] == MESSAGES[1:3]
    junk = [e for e in found if isinstance(e, Junk)]
    assert any(j.data == MESSAGES[0] for j in junk), "the lost body comes back as junk, to be tried as a message"


def test_a_body_glued_to_the_next_content_type_header_is_split_off() -> None:
    stream = MESSAGES[0] + b"Content-Type: x\r\n" + framed(MESSAGES[1])
    found = events(stream)
    assert bodies(found) == [MESSAGES[1]]
    assert any(isinstance(e, Junk) and e.data == MESSAGES[0] for e in found)


def test_garbage_lines_and_a_long_line_without_newline_are_junk() -> None:
    stream = b"hello\r\n" + b"x" * 100_000 + framed(MESSAGES[0])
    found = events(stream, chunks=[7, 4096, 50_000])
    assert bodies(found) == [MESSAGES[0]]
    assert sum(len(e.data) for e in found if isinstance(e, Junk)) >= 100_000


def test_an_oversized_body_is_skipped_without_being_kept() -> None:
    huge = b"y" * 5000
    found = events(framed(huge) + framed(MESSAGES[0]), chunks=[100, 100, 1000], max_body=1000)
    assert [type(e) for e in found] == [Oversized, Frame]
    assert found[0] == Oversized(5000) and bodies(found) == [MESSAGES[0]]


def test_an_empty_body_is_a_frame_of_its_own() -> None:
    found = events(b"Content-Length: 0\r\n\r\n" + framed(MESSAGES[0]))
    assert bodies(found) == [b"", MESSAGES[0]]


def test_unread_puts_the_next_message_back() -> None:
    framer = Framer()
    framer.feed(b"Content-Length: %d\r\n\r\n" % (len(MESSAGES[0]) + 20) + MESSAGES[0] + framed(MESSAGES[1]))
    first = framer.next_event()
    assert isinstance(first, Frame) and first.body.startswith(MESSAGES[0])
    framer.unread(first.body[len(MESSAGES[0]) :])
    second = framer.next_event()
    assert isinstance(second, Frame) and second.body == MESSAGES[1]


@given(st.data())
def test_any_chunking_finds_the_same_frames(data: st.DataObject) -> None:
    stream = b"".join(framed(m) for m in MESSAGES)
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=64), max_size=40))
    assert bodies(events(stream, cuts)) == MESSAGES


@given(st.lists(st.binary(max_size=300).filter(lambda b: b"ontent-" not in b.lower()), min_size=1, max_size=5))
def test_junk_between_frames_never_hides_a_later_frame(junks: list[bytes]) -> None:
    # Junk ends with a newline, or glues onto the next header: either way the frame after it is found.
    stream = b"".join(junk + framed(m) for junk, m in zip(junks, MESSAGES, strict=False))
    assert bodies(events(stream)) == MESSAGES[: len(junks)]
