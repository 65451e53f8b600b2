"""The answer as it forms: the text of `<nagent-response>` out of a reply still streaming in, and the step the model
is on ("writing calc.py"), for live display (issue 23). Pure: pieces of text in, text and a label out.

It follows the lexer's rules (tags.lexer): an element's body ends at the first literal `</name>`, so a
`<nagent-response>` written inside a `<nagent-write>` body is file content, never answer text; text outside any
element is not answer text either. What it shows is a preview: the reply's parse (tags.parser) decides what counts,
and the final result carries that. Text that may be the start of `</nagent-response>` is held back until the next
piece tells, so a close tag is never shown in pieces.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from .actions import KNOWN_TAGS, Action, Conversation, FilePatch, FileRead, Next, Read, Replace, Response, Shell, Write
from .lexer import read_name
from .tool import Tool

RESPONSE = "nagent-response"
_ATTR = re.compile(r"""([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def step_label(tag: str, path: str | None = None, command: str | None = None) -> str:
    """What the model is doing, in a few words: "reading diff.c", "writing calc.py", "running pytest"."""
    if tag in (Read.tag, FileRead.tag):
        return f"reading {path}" if path else "reading a file"
    if tag in (Write.tag, Replace.tag):
        return f"writing {path}" if path else "writing a file"
    if tag == Shell.tag:
        program = (command or "").split()
        return f"running {posixpath.basename(program[0])}" if program else "running a command"
    if tag == FilePatch.tag:
        return "merging segments"
    if tag == Tool.tag:
        return f"calling {command}" if command else "calling a tool"
    if tag == Conversation.tag:
        return "starting a sub-conversation"
    if tag == Next.tag:
        return "planning the next turn"
    if tag == Response.tag:
        return "answering"
    return tag


def action_step(action: Action, show_path: Callable[[str], str] = str) -> str:
    """The step label of an action about to run; `show_path` shortens its path for display."""
    if isinstance(action, (Read, FileRead, Write, Replace)):
        return step_label(action.tag, path=show_path(action.path))
    if isinstance(action, Shell):
        return step_label(action.tag, command=action.command)
    if isinstance(action, Tool):
        return step_label(action.tag, command=action.name)
    return step_label(action.tag)


class AnswerStream:
    """Feed it the reply's pieces in order; each `feed` gives the answer text that became certain."""

    def __init__(self, show_path: Callable[[str], str] = str) -> None:
        self.show_path = show_path  # shortens a path for the step label (the run's: workspace-relative)
        # Only the undecided tail is kept: appending to (and searching) the whole reply on every piece made a long
        # reply quadratic — a 10,000-line file written in 50,000 pieces took 15 s of CPU. Positions are relative
        # to `_buf`, which drops what is decided after each piece.
        self._buf = ""
        self._chars = 0
        self.step: str | None = None  # the element the model is writing or last wrote
        self._pos = 0  # everything before it is decided
        self._inside: str | None = None  # the element whose body we are in
        self._shell_at = 0  # where the open <nagent-shell>'s body starts (its command names the step)
        self._answers = 0  # <nagent-response> elements opened: the next one's text starts on a new paragraph
        self._pending_break = False

    @property
    def chars(self) -> int:
        """Characters of the reply so far."""
        return self._chars

    def feed(self, piece: str) -> str:
        self._buf += piece
        self._chars += len(piece)
        out: list[str] = []
        while self._advance(out):
            pass
        self._drop_decided()
        return "".join(out)

    def _drop_decided(self) -> None:
        keep_from = min(self._pos, self._shell_at) if self._inside == Shell.tag else self._pos
        if keep_from > 0:
            self._buf = self._buf[keep_from:]
            self._pos -= keep_from
            self._shell_at -= keep_from  # meaningful only inside a shell body, where it is >= keep_from

    def _advance(self, out: list[str]) -> bool:
        """One step of the scan; False when it must wait for more text."""
        if self._inside == RESPONSE:
            return self._in_response(out)
        if self._inside is not None:
            return self._in_body(self._inside)
        return self._outside()

    def _in_response(self, out: list[str]) -> bool:
        if self._pending_break:  # the result joins several answers with a blank line: so does the preview
            out.append("\n\n")
            self._pending_break = False
        close = f"</{RESPONSE}>"
        end = self._buf.find(close, self._pos)
        if end >= 0:
            out.append(self._buf[self._pos : end])
            self._pos, self._inside = end + len(close), None
            return True
        safe = len(self._buf) - _held_back(self._buf, self._pos, close)
        if safe > self._pos:
            out.append(self._buf[self._pos : safe])
            self._pos = safe
        return False

    def _in_body(self, name: str) -> bool:
        close = f"</{name}>"
        end = self._buf.find(close, self._pos)
        if name == Shell.tag:
            command = self._buf[self._shell_at : end if end >= 0 else len(self._buf)]
            if end >= 0 or command.strip() and command[-1].isspace():  # the program's name is whole
                self.step = step_label(name, command=command)
        if end < 0:
            self._pos = max(self._pos, len(self._buf) - len(close))  # the close tag may straddle two pieces
            return False
        self._pos, self._inside = end + len(close), None
        return True

    def _outside(self) -> bool:
        start = self._buf.find("<", self._pos)
        if start < 0:
            self._pos = len(self._buf)
            return False
        name = read_name(self._buf, start + 1)
        if name is None and start + 1 == len(self._buf):
            self._pos = start  # a lone "<" at the end: wait for what follows
            return False
        if name is not None and start + 1 + len(name) == len(self._buf):  # the name may go on
            if any(tag.startswith(name) for tag in KNOWN_TAGS):
                self._pos = start
                return False
        if name is None or name not in KNOWN_TAGS:
            self._pos = start + 1  # prose ("a < b") or another tag: not ours
            return True
        end = self._buf.find(">", start)
        if end < 0:
            self._pos = start  # the open tag is not whole yet
            return False
        head = self._buf[start + 1 + len(name) : end]
        attrs = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTR.finditer(head)}
        path = attrs.get("path")
        tool = attrs.get("name") if name == Tool.tag else None  # "calling calc/add" as soon as its name is known
        self.step = step_label(name, path=self.show_path(path) if path else None, command=tool)
        self._pos = end + 1
        if name == RESPONSE:
            self._answers += 1
            if self._answers > 1:
                self._pending_break = True
        if not head.rstrip().endswith("/"):
            self._inside = name
            self._shell_at = self._pos
        return True


def _held_back(text: str, start: int, close: str) -> int:
    """How many characters at the end of `text` (from `start` on) could begin `close`."""
    for size in range(min(len(close) - 1, len(text) - start), 0, -1):
        if close.startswith(text[-size:]):
            return size
    return 0
