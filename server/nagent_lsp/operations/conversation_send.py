"""`nagent.conversation.send` (issue 25, "the conversation is the chat"): the text the user typed at the end of a
conversation — its draft (`tags.draft`: after the last record, any number of lines) — is the next request.

The draft is taken out of the conversation and run as `nagent.edit` on the file the conversation is about, so the
conversation then reads as any other turn: `<user-prompt>` with the draft's text, the model's reply, the results.
`uri` may name the conversation file or its source file; a conversation's unsaved buffer is what is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.operations.args import EditArgs, SendArgs
from nagent_lsp.operations.conversation import conversation_text, file_and_conversation
from nagent_lsp.operations.edit import EditResult, edit
from nagent_lsp.operations.session import Session
from nagent_lsp.tags.draft import find_draft

EMPTY_DRAFT = "type a request at the end of the conversation"


def without_draft(draft: str) -> Callable[[str], str]:
    """Takes the draft out of the conversation as the run reads it (the same draft, else the text as it is)."""

    def rewrite(text: str) -> str:
        found = find_draft(text)
        return found.before if found.text == draft else text

    return rewrite


async def send(session: Session, port: EditorPort, args: SendArgs) -> EditResult:
    """The draft of the conversation `args.uri` names, run as `nagent.edit` on its file; the result is
    `nagent.edit`'s, with `request` (the draft)."""
    source, conversation = file_and_conversation(session, args.uri)
    draft = find_draft(conversation_text(port, conversation))
    if not draft.text:
        raise InvalidArgument("uri", f"{EMPTY_DRAFT} ({Path(conversation).name} has no text after its last record)")
    request = EditArgs(
        uri=source.as_uri(), request=draft.text, agent=args.agent, profile=args.profile, preview=args.preview
    )
    result = await edit(session, port, request, conversation=without_draft(draft.text))
    return attrs.evolve(result, request=draft.text)
