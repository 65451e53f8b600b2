"""The plain-text conversation file: nagent's block format, read and written as strings.

A file is a sequence of blocks, each starting on its own line::

    <initial_context>…</initial_context>      rebuilt every run, spliced in place
    <user-prompt>…</user-prompt>
    <agent-response>…</agent-response>
    <nagent-read-result path="…">…</nagent-read-result>   (any <nagent-*-result>)
    <system>…</system>
    <system attempt="N">…</system>                        a failed attempt's note (a rejected reply, a provider error)
    <nagent-turn-status utc="…" turn="N" … />            telemetry: kept, never sent
    <nagent-next-input>…</nagent-next-input>
    Interrupted...

Anything else the user typed is kept as a "text" block and sent as user text: the file is
the source of truth and the user may edit it freely. Pure: strings in, strings out; the
workflow does the (atomic) writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from nagent_lsp.core.model import Message
from nagent_lsp.tags.lexer import TagSyntaxError, is_name_start, parse_element, render_element

INITIAL_CONTEXT = "initial_context"
USER_PROMPT = "user-prompt"
AGENT_RESPONSE = "agent-response"
SYSTEM = "system"
NEXT_INPUT = "nagent-next-input"
TURN_STATUS = "nagent-turn-status"
INTERRUPTED = "Interrupted..."

#: Block kinds that are not tags.
TEXT = "text"
INTERRUPTED_KIND = "interrupted"


@dataclass(frozen=True)
class Block:
    """One block of a conversation file.

    kind: the tag name, ``"interrupted"`` or ``"text"`` (free text the user wrote).
    start/end: its span in the file (``raw == text[start:end]``).
    body: the content between the tags (None for self-closing tags and non-tag blocks).
    """

    kind: str
    start: int
    end: int
    raw: str
    attrs: tuple[tuple[str, str], ...] = ()
    body: str | None = None

    def attr(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return default


def parse_blocks(text: str) -> list[Block]:
    """Split a conversation file into blocks, in order.

    A tag block must start a line (indentation allowed) and end its line; a line that starts
    like a tag but does not parse (an unclosed tag the user is typing) is text, so no user
    text is ever dropped. Blank lines between blocks belong to no block.
    """
    blocks: list[Block] = []
    n = len(text)
    pos = 0
    text_start: int | None = None
    text_end = 0

    def flush() -> None:
        nonlocal text_start
        if text_start is not None:
            blocks.append(Block(TEXT, text_start, text_end, text[text_start:text_end]))
            text_start = None

    while pos < n:
        nl = text.find("\n", pos)
        line_end = n if nl < 0 else nl
        line = text[pos:line_end]
        stripped = line.strip()
        if not stripped:
            pos = line_end + 1
            continue
        p = pos + len(line) - len(line.lstrip())
        if stripped == INTERRUPTED:
            flush()
            blocks.append(Block(INTERRUPTED_KIND, p, p + len(INTERRUPTED), INTERRUPTED))
            pos = line_end + 1
            continue
        if text[p] == "<" and p + 1 < n and is_name_start(text[p + 1]):
            try:
                el = parse_element(text, p, framed=True)
            except TagSyntaxError:
                el = None
            if el is not None:
                rest = text.find("\n", el.end)
                rest = n if rest < 0 else rest
                if not text[el.end : rest].strip():
                    flush()
                    blocks.append(Block(el.name, el.start, el.end, text[el.start : el.end], el.attrs, el.body))
                    pos = rest + 1
                    continue
        if text_start is None:
            text_start = p
        text_end = pos + len(line.rstrip())
        pos = line_end + 1
    flush()
    return blocks


def render_block(
    name: str,
    body: str | None = None,
    attrs: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,
) -> str:
    """``<name a="v">\\n{body}\\n</name>`` (or self-closing when body is None); values escaped."""
    return render_element(name, attrs, body)


def user_prompt_block(prompt: str) -> str:
    return render_block(USER_PROMPT, prompt)


def agent_response_block(reply: str) -> str:
    return render_block(AGENT_RESPONSE, reply)


def system_block(note: str) -> str:
    return render_block(SYSTEM, note)


def attempt_block(note: str, attempt: int) -> str:
    """The note on a failed attempt of a turn: a rejected reply (kept out of the file, in outputs/) or a provider
    error. It stands for a model call as an <agent-response> does, so memory counts it as a turn: a run whose every
    attempt fails still grows the conversation, and must fold like any other (DESIGN §11)."""
    return render_block(SYSTEM, note, {"attempt": attempt})


def starts_turn(block: Block) -> bool:
    """Whether `block` begins a turn: a model reply, or the note standing for a failed attempt."""
    return block.kind == AGENT_RESPONSE or (block.kind == SYSTEM and block.attr("attempt") is not None)


def next_input_block(prompt: str) -> str:
    return render_block(NEXT_INPUT, prompt)


def append_block(text: str, block: str) -> str:
    """Append a rendered block: a newline first when the file is non-empty (nagent's discipline)."""
    return text + ("\n" if text else "") + block


def append_blocks(text: str, blocks: Iterable[str]) -> str:
    for block in blocks:
        text = append_block(text, block)
    return text


def find_initial_context(text: str) -> Block | None:
    """The first ``<initial_context>`` block, or None."""
    return next((b for b in parse_blocks(text) if b.kind == INITIAL_CONTEXT), None)


def set_initial_context(text: str, context: str) -> str:
    """Replace the first initial-context block with one holding ``context`` (a verbatim splice:
    the rest of the file is untouched), or prepend it followed by a blank line when missing.
    An empty file becomes the block plus a newline."""
    block = render_block(INITIAL_CONTEXT, context)
    found = find_initial_context(text)
    if found is not None:
        return text[: found.start] + block + text[found.end :]
    if not text:
        return block + "\n"
    return block + "\n\n" + text


def to_messages(text: str) -> list[Message]:
    """The conversation as role-separated chat messages.

    The first initial context becomes the system message (always first); ``<agent-response>``
    bodies are the assistant's; every other block goes to the user verbatim (tags included, so
    results keep their attributes), consecutive ones joined by a newline. Turn-status telemetry
    stays in the file and is not sent.
    """
    blocks = parse_blocks(text)
    system = next((b for b in blocks if b.kind == INITIAL_CONTEXT), None)
    messages: list[Message] = []
    if system is not None:
        messages.append(Message("system", system.body or ""))
    for block in blocks:
        if block is system or block.kind == TURN_STATUS:
            continue
        if block.kind == AGENT_RESPONSE:
            role, content = "assistant", block.body or ""
            if not content.strip():
                continue
        else:
            role, content = "user", block.raw
        if messages and messages[-1].role == role and role != "system":
            messages[-1] = Message(role, messages[-1].content + "\n" + content)
        else:
            messages.append(Message(role, content))
    return messages


def utc_stamp(when: datetime | None = None) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` for ``when`` (default: now)."""
    when = when or datetime.now(UTC)
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class TurnStatus:
    """One ``<nagent-turn-status …/>`` line: this turn's tokens and the conversation's totals."""

    utc: str
    turn: int
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_in_total: int = 0
    tokens_out_total: int = 0
    estimated: bool = False  # True when any figure is the chars/4 estimate, not the provider's
    # Conversation totals (DESIGN §11): cached input, replies that had content stripped (prose, unknown tags,
    # duplicates) and replies that wrote a driver block themselves (the fabrication cut), rejected attempts included.
    cache_read_total: int = 0
    stripped_turns: int = 0
    fabricated_turns: int = 0
    raw: str | None = None  # the sidecar (under outputs/) holding this turn's raw reply, when it was stripped

    def render(self) -> str:
        attrs: list[tuple[str, object]] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("estimated", "raw") and not value:
                continue  # only mark estimates and sidecars; provider figures and clean replies are the norm
            attrs.append((f.name, value))
        return render_element(TURN_STATUS, attrs, None)


def parse_turn_status(block: Block | str) -> TurnStatus:
    """Read a turn-status block back; missing or unreadable numbers count as 0 (users edit files)."""
    if isinstance(block, str):
        blocks = parse_blocks(block)
        if len(blocks) != 1 or blocks[0].kind != TURN_STATUS:
            raise ValueError("not a single <nagent-turn-status/> line")
        block = blocks[0]
    if block.kind != TURN_STATUS:
        raise ValueError(f"not a turn-status block: <{block.kind}>")
    values: dict[str, object] = {}
    for f in fields(TurnStatus):
        raw = block.attr(f.name)
        if f.name == "utc":
            values["utc"] = raw or ""
        elif f.name == "raw":
            values["raw"] = raw or None
        elif f.name == "estimated":
            values["estimated"] = raw == "true"
        else:
            try:
                values[f.name] = int(raw) if raw is not None else 0
            except ValueError:
                values[f.name] = 0
    return TurnStatus(**values)  # type: ignore[arg-type]


def last_turn_status(text: str) -> TurnStatus | None:
    """The newest turn status in the file (carries the conversation's running totals)."""
    for block in reversed(parse_blocks(text)):
        if block.kind == TURN_STATUS:
            return parse_turn_status(block)
    return None
