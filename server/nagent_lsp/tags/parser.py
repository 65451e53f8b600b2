"""Turn a model reply into ordered actions, notes and (at most) one hard error.

Known tags are parsed strictly: one malformed known tag rejects the whole reply, because
running half of what the model meant is worse than asking again. Everything else (prose,
reasoning leaks, unknown tags) is skipped with a note. A driver-output tag at the start of a
line means the model began writing the results itself: the reply is cut there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nagent_lsp.text.search_replace import BlockSyntaxError, parse_blocks

from .actions import (
    KNOWN_TAGS,
    Action,
    Conversation,
    FilePatch,
    FileRead,
    Next,
    Read,
    Replace,
    Response,
    Shell,
    Write,
)
from .lexer import (
    Element,
    TagSyntaxError,
    at_line_start,
    is_name_start,
    parse_element,
    parse_open_tag,
    read_name,
)
from .tool import TOOL_TAG, tool_action

#: Blocks only the server writes. One of these opening a line in a reply is a fabrication.
DRIVER_TAGS = frozenset(
    {
        "nagent-read-result",
        "nagent-file-read-result",
        "nagent-file-patch-result",
        "nagent-write-result",
        "nagent-replace-result",
        "nagent-shell-result",
        "nagent-tool-result",
        "nagent-conversation-result",
        "nagent-agent-result",
        "nagent-turn-status",
        "nagent-next-input",
        "user-prompt",
        "system",
        "initial_context",
    }
)
_DRIVER_PATTERN = re.compile(r"nagent-[A-Za-z0-9_-]*-result|hook-[A-Za-z0-9_-]+")

#: The log frame around a model turn; a model that echoes it is unwrapped, not ignored.
ECHO_WRAPPER = "agent-response"

_SELF_CLOSING = {"nagent-read": "path", "nagent-file-read": "path", "nagent-file-patch": "index"}
_BODY_NO_ATTRS = ("nagent-response", "nagent-shell", "nagent-next")
_CONVERSATION_ATTRS = ("conversation-file", "conversation-name")


def is_driver_tag(name: str) -> bool:
    return name in DRIVER_TAGS or _DRIVER_PATTERN.fullmatch(name) is not None


@dataclass(frozen=True)
class Note:
    """Something in the reply that did not become an action.

    kind: "ignored" (prose, unknown or malformed unknown tag, stray close tag),
    "unclosed-response" (an unclosed <nagent-response> taken to the end of the reply),
    "duplicate" (an exact repeat of an earlier action), "fabrication" (the cut).
    """

    kind: str
    message: str
    offset: int


@dataclass(frozen=True)
class ReplyError:
    """A malformed known tag: the reply is rejected and nothing in it runs."""

    message: str
    offset: int
    near: str  # up to 80 characters from the offset, for the correction and the log

    def __str__(self) -> str:
        return f"{self.message} (at offset {self.offset}, near {self.near!r})"


@dataclass(frozen=True)
class Fabrication:
    """The reply wrote a driver block at a line start; ``dropped`` valid actions after it were discarded."""

    tag: str
    offset: int
    dropped: int


@dataclass(frozen=True)
class ParsedReply:
    actions: tuple[Action, ...] = ()
    notes: tuple[Note, ...] = ()
    error: ReplyError | None = None
    fabrication: Fabrication | None = None
    duplicates: int = 0

    @property
    def ignored(self) -> tuple[Note, ...]:
        return tuple(n for n in self.notes if n.kind == "ignored")

    @property
    def responses(self) -> tuple[str, ...]:
        return tuple(a.text for a in self.actions if isinstance(a, Response))

    @property
    def only_responses(self) -> bool:
        return bool(self.actions) and all(isinstance(a, Response) for a in self.actions)

    @property
    def accepted(self) -> bool:
        """Whether the actions may run. A fabricating reply may not end the run on its own
        say-so (its answer was written after results it invented), so it is retried."""
        if self.error is not None or not self.actions:
            return False
        return not (self.fabrication is not None and self.only_responses)

    @property
    def is_final(self) -> bool:
        """Accepted and only responses: the run ends after this turn (unless a budget says otherwise)."""
        return self.accepted and self.only_responses

    @property
    def cleaned(self) -> bool:
        """True when the raw reply is not exactly its actions (junk, duplicates, a cut, an
        unclosed response): record ``canonical()`` in the conversation instead of the raw text."""
        return bool(self.notes)

    def canonical(self) -> str:
        """The actions as tags, one per line: what is recorded when the raw reply was cleaned."""
        return "\n".join(a.to_tag() for a in self.actions)


def _snippet(text: str, limit: int = 60) -> str:
    collapsed = " ".join(text.split())
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 1] + "…"


def _near(text: str, offset: int) -> str:
    return text[offset : offset + 80]


def _action(el: Element) -> Action:  # noqa: C901, PLR0912  2026-11-27: one shape check per known tag, each naming its problem
    """Check a known element's shape and build its action; raises TagSyntaxError naming the problem."""
    name, attrs, body = el.name, dict(el.attrs), el.body
    if name in _SELF_CLOSING:
        attr = _SELF_CLOSING[name]
        if body is not None:
            raise TagSyntaxError(f'<{name}> must be self-closing: <{name} {attr}="..." />', el.start)
        if list(attrs) != [attr]:
            raise TagSyntaxError(f'<{name}> needs exactly one attribute, {attr}="..."', el.start)
        value = attrs[attr]
        if not value.strip():
            raise TagSyntaxError(f"<{name}> has an empty {attr}", el.start)
        if name == "nagent-read":
            return Read(value)
        return FileRead(value) if name == "nagent-file-read" else FilePatch(value)
    if name == TOOL_TAG:
        return tool_action(el)
    if body is None:
        raise TagSyntaxError(f"<{name}> needs a body between <{name}> and </{name}>, not a self-closing tag", el.start)
    if name in _BODY_NO_ATTRS:
        if attrs:
            raise TagSyntaxError(f"<{name}> takes no attributes (got {', '.join(attrs)})", el.start)
        if name == "nagent-response":
            return Response(body.strip())
        if not body.strip():
            raise TagSyntaxError(f"<{name}> has an empty body", el.start)
        return Shell(body.strip()) if name == "nagent-shell" else Next(body.strip())
    if name == "nagent-write":
        if list(attrs) != ["path"]:
            raise TagSyntaxError('<nagent-write> needs exactly one attribute, path="..."', el.start)
        if not attrs["path"].strip():
            raise TagSyntaxError("<nagent-write> has an empty path", el.start)
        content = body[2:] if body.startswith("\r\n") else body[1:] if body.startswith("\n") else body
        return Write(attrs["path"], content)
    if name == "nagent-replace":
        if list(attrs) != ["path"]:
            raise TagSyntaxError('<nagent-replace> needs exactly one attribute, path="..."', el.start)
        if not attrs["path"].strip():
            raise TagSyntaxError("<nagent-replace> has an empty path", el.start)
        try:
            blocks = parse_blocks(body)
        except BlockSyntaxError as exc:
            raise TagSyntaxError(f"<nagent-replace>: {exc}", el.start) from None
        return Replace(attrs["path"], blocks)
    # nagent-conversation
    for key in attrs:
        if key not in _CONVERSATION_ATTRS:
            raise TagSyntaxError(
                f"<nagent-conversation> does not take {key}; use conversation-file or conversation-name", el.start
            )
    if len(attrs) > 1:
        raise TagSyntaxError("<nagent-conversation> takes only one of conversation-file or conversation-name", el.start)
    if not body.strip():
        raise TagSyntaxError("<nagent-conversation> needs a prompt body", el.start)
    return Conversation(body.strip(), attrs.get("conversation-file"), attrs.get("conversation-name"))


def _parse_known(text: str, pos: int, name: str) -> tuple[Action, int, Note | None]:
    """Parse a known tag at ``pos`` strictly. Returns (action, end, note)."""
    try:
        el = parse_element(text, pos)
    except TagSyntaxError as exc:
        if exc.message.startswith("missing closing"):
            if name == "nagent-response":
                # A final answer cut off before its close tag is still the answer.
                _, attrs, _, open_end = parse_open_tag(text, pos)
                el = Element(name, tuple(attrs), text[open_end:], pos, len(text), open_end)
                note = Note("unclosed-response", "unclosed <nagent-response> taken to the end of the reply", pos)
                return _action(el), len(text), note
            if name in _SELF_CLOSING:
                attr = _SELF_CLOSING[name]
                raise TagSyntaxError(f'<{name}> must be self-closing: <{name} {attr}="..." />', pos) from None
            raise TagSyntaxError(f"<{name}> is not closed: missing </{name}>", pos) from None
        raise
    return _action(el), el.end, None


@dataclass
class _Scan:
    full: str
    actions: list[Action] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    fabrication_at: tuple[str, int] | None = None
    dropped: int = 0

    def ignore(self, reason: str, start: int, end: int) -> None:
        self.notes.append(Note("ignored", f'{reason}: "{_snippet(self.full[start:end])}"', start))

    def scan(self, start: int, end: int) -> None:  # noqa: C901, PLR0912, PLR0915  2026-11-27: the tag scanner's main loop; its states share local positions
        """Scan ``full[start:end]``; raises TagSyntaxError (outer offsets) for a malformed known tag."""
        text = self.full[:end]  # bound close-tag searches to this region (wrapper bodies)
        pos = start
        prose_start: int | None = None

        def flush(upto: int) -> None:
            nonlocal prose_start
            if prose_start is not None and self.fabrication_at is None and text[prose_start:upto].strip():
                self.ignore("prose", prose_start, upto)
            prose_start = None

        while pos < end:
            lt = text.find("<", pos)
            if lt < 0:
                lt = end
            if text[pos:lt].strip() and prose_start is None:
                prose_start = pos
            if lt >= end:
                break
            name = read_name(text, lt + 1) if lt + 1 < end and is_name_start(text[lt + 1]) else None
            if name is None:
                # "a < b", "</stray>", "<!-- -->": text, not a tag.
                if prose_start is None:
                    prose_start = lt
                pos = lt + 1
                continue
            flush(lt)
            cut = self.fabrication_at is not None
            if not cut and is_driver_tag(name) and at_line_start(self.full, lt):
                self.fabrication_at = (name, lt)
                self.notes.append(Note("fabrication", f"<{name}> written by the model; the reply is cut here", lt))
                cut = True
            if name in KNOWN_TAGS:
                try:
                    action, pos, note = _parse_known(text, lt, name)
                except TagSyntaxError:
                    if cut:  # after the cut nothing runs, so a broken tag there is not worth a retry
                        pos = lt + 1
                        continue
                    raise
                if cut:
                    self.dropped += 1
                else:
                    self.actions.append(action)
                    if note:
                        self.notes.append(note)
                continue
            try:
                el = parse_element(text, lt)
            except TagSyntaxError:
                # Skip to the next "<": what follows may still hold a valid tag (a leaked,
                # unclosed <thought> before the real actions).
                nxt = text.find("<", lt + 1)
                nxt = end if nxt < 0 else nxt
                if not cut:
                    self.ignore(f"malformed <{name}>", lt, nxt)
                pos = nxt
                continue
            if name == ECHO_WRAPPER and el.body is not None:
                self.scan(el.open_end, el.end - len(f"</{name}>"))
            elif not cut:
                self.ignore(f"unknown tag <{name}>", lt, el.end)
            pos = el.end
        flush(end)


def parse_reply(text: str) -> ParsedReply:
    """Parse a model reply. Never raises: a malformed known tag becomes ``error`` with no actions."""
    scan = _Scan(text)
    try:
        scan.scan(0, len(text))
    except TagSyntaxError as exc:
        return ParsedReply(error=ReplyError(exc.message, exc.offset, _near(text, exc.offset)))
    fabrication = None
    if scan.fabrication_at is not None:
        fabrication = Fabrication(scan.fabrication_at[0], scan.fabrication_at[1], scan.dropped)
    actions: list[Action] = []
    seen: set[Action] = set()
    notes = list(scan.notes)
    duplicates = 0
    for action in scan.actions:
        if action in seen:
            duplicates += 1
            continue
        seen.add(action)
        actions.append(action)
    if duplicates:
        notes.append(Note("duplicate", f"{duplicates} exact duplicate action(s) collapsed", 0))
    return ParsedReply(tuple(actions), tuple(notes), None, fabrication, duplicates)
