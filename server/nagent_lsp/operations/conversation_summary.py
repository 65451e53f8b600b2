"""`nagent.conversation.summarize` and `nagent.conversation.compact`: a conversation, read back by the model.

Compact archives the conversation (nothing is lost) and starts the file again from its initial context and a
summary of what happened, so a long conversation stops costing its whole history on every request.
"""

from __future__ import annotations

import attrs

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.model import Message, estimate_tokens
from nagent_lsp.core.ports import ChatModel, EditorPort
from nagent_lsp.llm.models import require_summary_model
from nagent_lsp.operations.args import CompactArgs, UriArgs
from nagent_lsp.operations.conversation import resolve
from nagent_lsp.operations.session import Session
from nagent_lsp.tags.transcript import find_initial_context, render_block, system_block

ASK = (
    "Below is a working conversation between a user, a coding model and the tools it used on one file. "
    "Summarise it for whoever continues the work: the user's goals, the decisions taken and why, the changes "
    "made to the file, commands run and their outcome, and anything unresolved. Name files and functions "
    "exactly. Do not describe the conversation format or the tool itself. Plain text, no preamble, at most 1,000 "
    "words."
)


@attrs.frozen
class ConversationSummary:
    """`nagent.conversation.summarize`: the model's summary; nothing is changed."""

    summary: str


@attrs.frozen
class CompactedConversation:
    """`nagent.conversation.compact`: where the whole conversation was archived, and its size (estimated tokens)
    before and after."""

    archivedPath: str
    tokensBefore: int
    tokensAfter: int


def _history_text(text: str) -> str:
    """The conversation without its initial context (rebuilt every run, nothing to summarise there)."""
    block = find_initial_context(text)
    return text[block.end :].strip() if block is not None else text.strip()


async def _summarise(model: ChatModel, history: str, instruction: str | None) -> str:
    ask = ASK + (f"\n\nAlso: {instruction}" if instruction else "")
    reply = await model.complete(
        [Message("system", ask), Message("user", f"<conversation>\n{history}\n</conversation>")]
    )
    summary = reply.text.strip()
    if not summary:
        raise UserError("the model returned an empty summary; nothing was changed")
    if reply.finish_reason in ("length", "max_tokens"):  # kept, and marked: the cap ended it, not the model
        summary += "\n[…truncated at compactionMaxTokens]"
    return summary


async def summarize_conversation(session: Session, port: EditorPort, args: UriArgs) -> ConversationSummary:
    model = require_summary_model(session.settings, session.environ, "compaction")
    _, ref = resolve(session, args.uri)
    history = _history_text(ConversationFile.open(ref.conversation_path, port).text)
    if not history:
        raise UserError(f"the conversation of {ref.path} is empty; nothing to summarise")
    return ConversationSummary(await _summarise(model, history, None))


async def compact_conversation(session: Session, port: EditorPort, args: CompactArgs) -> CompactedConversation:
    model = require_summary_model(session.settings, session.environ, "compaction")
    store, ref = resolve(session, args.uri)
    async with store.lock_for(ref):
        convo = ConversationFile.open(ref.conversation_path, port)
        history = _history_text(convo.text)
        if not history:
            raise UserError(f"the conversation of {ref.path} is empty; nothing to compact")
        summary = await _summarise(model, history, args.instruction)
        before = estimate_tokens(convo.text)
        context = find_initial_context(convo.text)
        archived = store.archive(ref)
        fresh = ConversationFile(ref.conversation_path, "")
        if context is not None:
            fresh.text = context.raw + "\n"
        note = f"This conversation was compacted; the full history is archived at {archived}. Summary of it:"
        fresh.append(system_block(note), render_block("conversation-summary", summary))
    return CompactedConversation(str(archived), before, estimate_tokens(fresh.text))
