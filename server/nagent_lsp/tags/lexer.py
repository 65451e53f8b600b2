"""XML-ish element lexer shared by reply parsing and the conversation file.

Not XML: bodies are raw text that end at the first literal ``</name>`` (never scanned for
nested elements, no entity decoding), so a model can write code without escaping it.
Attribute values are the one place entities are decoded, because we escape values we render
(nagent did not, and a ``"`` in a path broke its format).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_WS = " \t\r\n"

#: Attribute the renderer adds when a body contains its own close tag; the lexer then uses
#: the length instead of the first close tag, so such blocks still read back intact.
FRAME_ATTR = "body_chars"


class TagSyntaxError(ValueError):
    """A malformed element; ``message`` names the problem, ``offset`` is where it was found."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class Element:
    name: str
    attrs: tuple[tuple[str, str], ...]  # in source order, values decoded
    body: str | None  # None for a self-closing element
    start: int  # offset of "<"
    end: int  # offset just past "/>" or the close tag
    open_end: int  # offset just past the open tag's ">" (== end when self-closing)

    def attr(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return default


def is_name_start(char: str) -> bool:
    return char in _NAME_START


def read_name(text: str, pos: int) -> str | None:
    """The tag name starting at ``pos`` (just after "<"), or None."""
    m = _NAME_RE.match(text, pos)
    return m.group(0) if m else None


_ENTITY_RE = re.compile(r"&(quot|amp|lt|gt|apos|#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6});")
_NAMED = {"quot": '"', "amp": "&", "lt": "<", "gt": ">", "apos": "'"}


def _decode_entity(m: re.Match[str]) -> str:
    ref = m.group(1)
    if ref in _NAMED:
        return _NAMED[ref]
    try:
        code = int(ref[2:], 16) if ref[1] in "xX" else int(ref[1:])
        return chr(code)
    except (ValueError, OverflowError):
        return m.group(0)  # not a real character: keep the text as written


def unescape_attr(value: str) -> str:
    """Decode the entities ``escape_attr`` produces; a lone ``&`` stays as written."""
    return _ENTITY_RE.sub(_decode_entity, value) if "&" in value else value


def escape_attr(value: str) -> str:
    """Escape an attribute value so it never ends the value, the tag or the line."""
    return (
        value.replace("&", "&amp;")
        .replace('"', "&quot;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
    )


def parse_open_tag(text: str, pos: int) -> tuple[str, list[tuple[str, str]], bool, int]:  # noqa: C901, PLR0912  2026-11-27: a hand-written scanner: one branch per character class
    """Parse ``<name attr="v"...>`` or ``.../>`` at ``pos``.

    Returns (name, attrs, self_closing, offset past the tag). Raises TagSyntaxError.
    """
    n = len(text)
    if pos >= n or text[pos] != "<":
        raise TagSyntaxError("expected '<'", pos)
    name = read_name(text, pos + 1)
    if name is None:
        raise TagSyntaxError("expected a tag name after '<'", pos)
    i = pos + 1 + len(name)
    attrs: list[tuple[str, str]] = []
    seen: set[str] = set()
    while True:
        if i >= n:
            raise TagSyntaxError(f"unterminated <{name}> tag", pos)
        c = text[i]
        if c == ">":
            return name, attrs, False, i + 1
        if c == "/":
            if text.startswith("/>", i):
                return name, attrs, True, i + 2
            raise TagSyntaxError(f"malformed <{name}> tag: expected '/>'", i)
        if c not in _WS:
            # Attributes must be separated by whitespace: `a="1"b="2"` is an error.
            raise TagSyntaxError(f"malformed <{name}> tag at {c!r}", i)
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            raise TagSyntaxError(f"unterminated <{name}> tag", pos)
        if text[i] in ">/":
            continue
        attr = read_name(text, i)
        if attr is None:
            raise TagSyntaxError(f"expected an attribute name in <{name}>, got {text[i]!r}", i)
        i += len(attr)
        if not text.startswith('="', i):
            raise TagSyntaxError(f'attribute {attr} in <{name}> must be written {attr}="..."', i)
        i += 2
        close = text.find('"', i)
        if close < 0:
            raise TagSyntaxError(f"unterminated value for attribute {attr} in <{name}>", i)
        if attr in seen:
            raise TagSyntaxError(f"duplicate attribute {attr} in <{name}>", i)
        seen.add(attr)
        attrs.append((attr, unescape_attr(text[i:close])))
        i = close + 1


def parse_element(text: str, pos: int, *, framed: bool = False) -> Element:
    """Parse one element at ``pos``; the body ends at the first ``</name>``.

    With ``framed`` (conversation files) the body is the rendered content (the newlines
    ``render_element`` puts around it are removed) and a valid ``body_chars`` attribute written by
    ``render_element`` locates the close tag exactly and is removed from ``attrs``; if the
    file was edited so the length no longer fits, the first close tag is used instead.
    """
    name, attrs, self_closing, open_end = parse_open_tag(text, pos)
    if self_closing:
        return Element(name, tuple(attrs), None, pos, open_end, open_end)
    close_tag = f"</{name}>"
    if framed:
        frame = next((v for k, v in attrs if k == FRAME_ATTR), None)
        if frame is not None:
            attrs = [(k, v) for k, v in attrs if k != FRAME_ATTR]
            if frame.isascii() and frame.isdigit() and text.startswith("\n", open_end):
                body_end = open_end + 1 + int(frame)
                if text.startswith("\n" + close_tag, body_end):
                    return Element(
                        name,
                        tuple(attrs),
                        text[open_end + 1 : body_end],
                        pos,
                        body_end + 1 + len(close_tag),
                        open_end,
                    )
    close = text.find(close_tag, open_end)
    if close < 0:
        raise TagSyntaxError(f"missing closing {close_tag}", pos)
    body = text[open_end:close]
    if framed:
        body = strip_frame_newlines(body)
    return Element(name, tuple(attrs), body, pos, close + len(close_tag), open_end)


def render_element(
    name: str,
    attrs: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,
    body: str | None = None,
) -> str:
    """Render a block: ``<name a="v" />`` when body is None, else ``<name a="v">\\n{body}\\n</name>``.

    Values are escaped (None values are left out, bools become true/false). When the body
    contains its own close tag a ``body_chars`` frame is added so the block still reads back.
    """
    if read_name(name, 0) != name:
        raise ValueError(f"invalid tag name: {name!r}")
    items = attrs.items() if isinstance(attrs, Mapping) else (attrs or ())
    parts = [f"<{name}"]
    for key, value in items:
        if value is None:
            continue
        if key == FRAME_ATTR or read_name(key, 0) != key:
            raise ValueError(f"invalid attribute name: {key!r}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f' {key}="{escape_attr(str(value))}"')
    if body is None:
        return "".join(parts) + " />"
    close_tag = f"</{name}>"
    # A trailing "\r" would read back as part of a CRLF line end, so frame that too.
    if close_tag in body or body.endswith("\r"):
        parts.append(f' {FRAME_ATTR}="{len(body)}"')
    return "".join(parts) + ">\n" + body + "\n" + close_tag


def strip_frame_newlines(body: str) -> str:
    """Undo the renderer's newline after the open tag and before the close tag (if present)."""
    if body.startswith("\r\n"):
        body = body[2:]
    elif body.startswith("\n"):
        body = body[1:]
    if body.endswith("\r\n"):
        body = body[:-2]
    elif body.endswith("\n"):
        body = body[:-1]
    return body


def at_line_start(text: str, pos: int) -> bool:
    """True when only spaces/tabs precede ``pos`` on its line."""
    line_start = text.rfind("\n", 0, pos) + 1
    return text[line_start:pos].strip(" \t") == ""
