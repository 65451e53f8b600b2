"""The draft of a conversation (issue 25, "the conversation is the chat"): what the user typed after the
conversation's last record, which `nagent.conversation.send` runs as the next request.

How the draft is recognised (documented in README, "Chat in the conversation"):

- A **record** is a block the server writes (`tags.transcript.parse_blocks`): `<initial_context>`, `<user-prompt>`,
  `<agent-response>`, `<system>`, `<conversation-summary>`, `<nagent-turn-status …/>`, `<nagent-next-input>`, every
  `<nagent-…>` tag (the `-result` blocks, `<nagent-edit-result>`, `<nagent-review-result>`…) and `Interrupted...`.
  A record starts a line and its closing tag ends one (else the line is the user's text, as `parse_blocks` says).
- The **draft** is everything after the end of the last record: any number of lines, blank lines and Markdown
  included, with the blank lines around it trimmed. Text the user wrote *between* records stays where it is (it
  is sent as context, as before) and is never taken as the request. A conversation with no record at all is all
  draft. A tag the user types that is not one of the server's (`<b>`, `<details>`) is draft text.
- The draft's **line** (`draftLine`, 0-based) is where its first character is; without a draft, the line after
  the last record's closing line (the file's last line when that is blank, or the line past its end, which an
  editor adds when the user types there).
"""

from __future__ import annotations

import attrs

from nagent_lsp.tags.transcript import (
    AGENT_RESPONSE,
    INITIAL_CONTEXT,
    INTERRUPTED_KIND,
    NEXT_INPUT,
    SYSTEM,
    TURN_STATUS,
    USER_PROMPT,
    parse_blocks,
)

RECORD_KINDS = frozenset(
    {INITIAL_CONTEXT, USER_PROMPT, AGENT_RESPONSE, SYSTEM, TURN_STATUS, NEXT_INPUT, INTERRUPTED_KIND,
     "conversation-summary"}
)  # fmt: skip


@attrs.frozen
class Draft:
    """`text`: the draft, trimmed ("" when none); `start`: its offset in the conversation (where the records end
    when there is none); `line`: `draftLine`; `before`: the conversation without the draft."""

    text: str
    start: int
    line: int
    before: str


def is_record(kind: str) -> bool:
    return kind in RECORD_KINDS or kind.startswith("nagent-")


def find_draft(conversation: str) -> Draft:
    """The draft of `conversation` (see the module docstring)."""
    records_end = 0
    for block in parse_blocks(conversation):
        if is_record(block.kind):
            records_end = block.end
    rest = conversation[records_end:]
    text = rest.strip()
    if text:
        start = records_end + (len(rest) - len(rest.lstrip()))
        line = conversation.count("\n", 0, start)
    else:
        start = records_end
        line = conversation.count("\n", 0, records_end) + (1 if records_end else 0)
    before = conversation[:records_end].rstrip() + ("\n" if records_end else "")
    return Draft(text, start, line, before)
