"""Memory under a budget (DESIGN §11): before a model call, a conversation whose messages exceed
`conversation.tokenBudget` has its oldest turns folded into one `<conversation-summary>` block.

What is never folded: the initial context (rebuilt every run, it is the system message) and the last two turns (a
turn is a model reply with the results and notes that follow it), so the model always sees what it just did and
what came of it. A failed attempt is a turn too (`tags.transcript.starts_turn`): a rejected reply, whose note stands
in the file for it, or a provider error; runs that fail grow the conversation as much as runs that succeed, and fold
alike. The newest `<user-prompt>`, when it falls among the folded blocks, is kept verbatim after the summary: the
request being worked on is not left to a paraphrase. Earlier summaries are folded again with the rest, so memory
stays one block. The unfolded file is archived first (nothing is lost), and the fold is recorded in a `<system>` note
naming the archive. The summary is written by `summaryModel`; its tokens are reported apart (`tokens.memory`). A fold
that fails (the model errs) leaves the conversation as it was, and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.core.model import Message, ModelCancelled, ModelError, estimate_tokens
from nagent_lsp.core.ports import ChatModel
from nagent_lsp.llm.tokens import Tokens
from nagent_lsp.store.conversations import archive_text
from nagent_lsp.tags.transcript import (
    INITIAL_CONTEXT,
    SYSTEM,
    USER_PROMPT,
    Block,
    parse_blocks,
    render_block,
    starts_turn,
    system_block,
)

log = logging.getLogger("nagent_lsp")

SUMMARY = "conversation-summary"
KEEP_TURNS = 2
# A fold takes at least this share of the budget, or waits: when the initial context alone is near or over the budget,
# every call is "over", and folding the one small turn that just aged out (a correction) would cost a summary call per
# model call for almost nothing. The history then stays under (budget / MIN_FOLD_SHARE + the summary + the kept turns).
MIN_FOLD_SHARE = 4

FOLD_ASK = (
    "You keep the working memory of a coding session on one file. Below are the oldest turns of the session (the "
    "user's requests, the model's actions, the tools' results, and any earlier memory summary). Rewrite them as one "
    "compact memory for the model that continues the work: the user's goals and requests, decisions and their "
    "reasons, what was changed in which files (name files, functions and line numbers exactly), commands run and "
    "their outcomes, facts learned from reads, and what is still open. Keep every fact the work still needs; drop "
    "file contents that can be read again, repetition and chatter. Plain text, no preamble, at most 800 words (the "
    "reply is capped by memoryMaxTokens)."
)


def messages_tokens(messages: list[Message]) -> int:
    """The estimate (ceil(chars/4) per message) of what a call will send."""
    return sum(estimate_tokens(m.content) for m in messages)


@dataclass(frozen=True)
class FoldPlan:
    folded: list[Block]  # the blocks to fold, in order
    start: int  # offsets in the text: the folded span
    end: int
    prompt: Block | None  # the newest user prompt among them, kept verbatim


def plan_fold(text: str, keep_turns: int = KEEP_TURNS) -> FoldPlan | None:
    """What a fold would take, or None when there is nothing to fold (fewer turns than it keeps, or only an earlier
    summary before them)."""
    blocks = [b for b in parse_blocks(text) if b.kind != INITIAL_CONTEXT]
    turn_starts = [i for i, b in enumerate(blocks) if starts_turn(b)]
    if len(turn_starts) <= keep_turns:
        return None
    cut = turn_starts[-keep_turns]
    folded = blocks[:cut]
    if not any(starts_turn(b) for b in folded):
        return None
    prompt = next((b for b in reversed(folded) if b.kind == USER_PROMPT), None)
    return FoldPlan(folded, folded[0].start, blocks[cut].start, prompt)


def fresh_tokens(plan: FoldPlan) -> int:
    """What a fold would take out of the conversation for good: the folded blocks less the earlier memory (a summary
    and the note before it), which comes back rewritten, and the request kept verbatim."""
    kept = {id(plan.prompt)}
    for i, block in enumerate(plan.folded):
        if block.kind == SUMMARY:
            kept.add(id(block))
            if i and plan.folded[i - 1].kind == SYSTEM:
                kept.add(id(plan.folded[i - 1]))
    return sum(estimate_tokens(b.raw) for b in plan.folded if id(b) not in kept)


@dataclass
class Memory:
    """The fold policy of a run (and its sub-conversations): `budget` tokens; `summary_model` makes the summary
    model (`summaryModel`) on the first fold, or gives None when none is configured (then nothing is folded)."""

    budget: int
    summary_model: Callable[[], ChatModel | None]
    folds: int = 0
    _model: ChatModel | None = field(default=None, repr=False)
    _made: bool = False

    def over(self, messages: list[Message]) -> bool:
        return messages_tokens(messages) > self.budget

    def model(self) -> ChatModel | None:
        if not self._made:
            self._model, self._made = self.summary_model(), True
        return self._model

    async def aclose(self) -> None:
        if self._model is not None:
            await self._model.aclose()

    async def fold(self, convo: ConversationFile, tokens: Tokens, cancel: asyncio.Event | None = None) -> bool:
        """Fold the oldest turns of `convo` (archiving it first); True when the conversation changed."""
        plan = plan_fold(convo.text)
        if plan is None:
            return False
        if fresh_tokens(plan) < self.budget // MIN_FOLD_SHARE:
            return False
        history = "\n".join(b.raw for b in plan.folded)
        model = self.model()
        if model is None:
            return False
        ask = [Message("system", FOLD_ASK), Message("user", f"<conversation-turns>\n{history}\n</conversation-turns>")]
        try:
            reply = await model.complete(ask, cancel=cancel)
        except ModelCancelled:
            tokens.add_memory_unanswered(ask)
            raise
        except ModelError as exc:
            log.warning("memory fold of %s failed: %s", convo.path.name, exc)
            return False
        tokens.add_memory(reply.usage)
        summary = reply.text.strip()
        if not summary:
            log.warning("memory fold of %s: the summary model returned nothing", convo.path.name)
            return False
        archived = archive_text(convo.path, convo.disk_text())
        folded_tokens = estimate_tokens(history)
        turns = sum(1 for b in plan.folded if starts_turn(b))
        note = (
            f"{turns} earlier turn(s) of this conversation (about {folded_tokens} tokens) were folded into the summary "
            f"below, to keep it under conversation.tokenBudget ({self.budget} tokens). The full text is archived at "
            f"{archived}."
        )
        if reply.finish_reason in ("length", "max_tokens"):  # kept: it is what the cap bought, and it says so
            note += " The summary was cut at its output cap (memoryMaxTokens); read the archive for what it lacks."
        parts = [
            system_block(note),
            render_block(SUMMARY, summary, {"archived": archived, "turns": turns, "folded_tokens": folded_tokens}),
        ]
        if plan.prompt is not None:
            parts.append(plan.prompt.raw)
        text = convo.text
        convo.text = text[: plan.start] + "\n".join(parts) + "\n" + text[plan.end :]
        convo.save()
        self.folds += 1
        log.info("folded %d turn(s) of %s into memory; archived at %s", turns, convo.path.name, archived)
        return True
