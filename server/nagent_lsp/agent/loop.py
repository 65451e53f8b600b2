"""The model loop: send the conversation, parse the reply, run its actions, append results, repeat.

Malformed replies get a visible <system attempt="N"> correction and at most MAX_ATTEMPTS tries per turn; the raw
reply is kept in outputs/ rather than in the conversation, so a mistake is never replayed as an example (the
correction says where, and that <nagent-read> reads it back). Each failed attempt's note is a turn for memory, so a
run that fails folds like one that succeeds and the token budget holds either way.
A provider error is tried again only when it says it may pass (`ModelError.retryable`): the adapter has already
retried rate limits, server errors and timeouts, and a rejected key or an unknown model fails the same way every
time, so the run stops at once. While the adapter waits to retry (a Retry-After), the progress says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.agent.memory import Memory
from nagent_lsp.agent.run import MAX_DEPTH, EditSession, live_status
from nagent_lsp.agent.tools import execute
from nagent_lsp.core.identity import slug
from nagent_lsp.core.model import Message, ModelCancelled, ModelError, ModelNotConfigured, Reply, retry_notice
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.tags import (
    MAX_ATTEMPTS,
    Conversation,
    Next,
    ParsedReply,
    Response,
    advisories,
    conversation_result_body,
    correction,
    exhausted_message,
    parse_reply,
    render_result,
)
from nagent_lsp.tags.rules import provider_error_note, raw_reply_note, rejected_note
from nagent_lsp.tags.stream import action_step
from nagent_lsp.tags.transcript import (
    TurnStatus,
    agent_response_block,
    attempt_block,
    last_turn_status,
    next_input_block,
    system_block,
    to_messages,
    user_prompt_block,
    utc_stamp,
)

log = logging.getLogger("nagent_lsp")


class RunFailed(Exception):
    """The run cannot go on (every attempt of a turn failed); nothing is applied."""


@dataclass
class _Telemetry:
    """One turn's replies that were stripped or fabricated (its rejected attempts included), and the sidecar of the
    accepted reply's raw text when the conversation records a cleaned copy."""

    stripped: int = 0
    fabricated: int = 0
    raw: str | None = None
    cache_before: int = 0

    def count(self, parsed: ParsedReply, rejected: bool) -> None:
        if rejected or _stripped(parsed):
            self.stripped += 1
        if parsed.fabrication is not None:
            self.fabricated += 1


def _stripped(parsed: ParsedReply) -> bool:
    """Whether the conversation records a cleaned copy of the reply instead of its raw text."""
    return bool(parsed.ignored or parsed.duplicates or parsed.fabrication)


@dataclass
class LoopOutcome:
    responses: list[str] = field(default_factory=list)
    steps: int = 0
    stopped_by_limit: bool = False


async def run_loop(session: EditSession, convo: ConversationFile, memory: Memory | None = None) -> LoopOutcome:
    """`memory`: the fold policy (DESIGN §11), also handed to sub-conversations; None never folds."""
    outcome = LoopOutcome()
    max_steps = session.settings.maxSteps
    while outcome.steps < max_steps:
        outcome.steps += 1
        session.report(live_status(session, outcome.steps))
        before = (session.tokens.input, session.tokens.output)
        telemetry = _Telemetry(cache_before=session.tokens.cache_read)
        reply_text, parsed, finish = await _accepted_reply(session, convo, outcome.steps, memory, telemetry)
        body = reply_text
        if _stripped(parsed):
            body = _clean(parsed)
            telemetry.raw = _keep_raw(session, convo, outcome.steps, 0, reply_text, parsed)
        blocks = [agent_response_block(body)]
        blocks += [system_block(note) for note in advisories(parsed, _truncated(finish))]
        if telemetry.raw is not None:
            blocks.append(system_block(raw_reply_note(telemetry.raw)))
        blocks.append(_turn_status(session, convo, outcome.steps, before, telemetry))
        convo.append(*blocks)
        ran_action, nexts = False, []
        for action in parsed.actions:
            if session.cancel.is_set():
                raise ModelCancelled("cancelled")
            if isinstance(action, Response):
                outcome.responses.append(action.text)
            elif isinstance(action, Next):
                nexts.append(action.prompt)
            else:
                session.report(live_status(session, outcome.steps, step=action_step(action, session.shown_path)))
                if isinstance(action, Conversation):
                    convo.append(await run_child(session, action, memory))
                else:
                    convo.append(await execute(session, action))
                ran_action = True
        if nexts:
            convo.append(*(next_input_block(p) for p in nexts))
        if not ran_action and not nexts and _truncated(finish) is None:
            return outcome
    outcome.stopped_by_limit = True
    convo.append(system_block(f"The run stopped after {max_steps} turns (setting nagent.maxSteps)."))
    return outcome


async def _accepted_reply(
    session: EditSession, convo: ConversationFile, turn: int, memory: Memory | None, telemetry: _Telemetry
) -> tuple[str, ParsedReply, str | None]:
    provider_failed = False
    last_error = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            reply = await _ask(session, convo, turn, memory)
        except (ModelCancelled, ModelNotConfigured):
            raise
        except ModelError as exc:
            provider_failed = True
            last_error = str(exc)
            if not exc.retryable:
                message = f"The model provider failed; the run stopped and nothing was applied. {exc}"
                convo.append(attempt_block(message, attempt))
                raise RunFailed(message) from None
            convo.append(attempt_block(provider_error_note(str(exc), attempt), attempt))
            continue
        provider_failed = False
        session.tokens.add(reply.usage)
        parsed = parse_reply(reply.text)
        note = correction(parsed, _truncated(reply.finish_reason))
        telemetry.count(parsed, rejected=note is not None)
        if note is None:
            return reply.text, parsed, reply.finish_reason
        kept = _keep_raw(session, convo, turn, attempt, reply.text, parsed)
        convo.append(attempt_block(rejected_note(note, attempt, kept), attempt))
    message = exhausted_message(provider_failed)
    if provider_failed and last_error:
        message = f"{message} Last error: {last_error}"
    convo.append(system_block(message))
    raise RunFailed(message)


async def _ask(session: EditSession, convo: ConversationFile, turn: int, memory: Memory | None = None) -> Reply:
    """One model call; a retry wait the adapter announces (a server's Retry-After) shows in the progress. Over the
    token budget, the oldest turns are folded into memory first. A call cancelled before its reply still counts
    what it sent (the estimate: no usage comes back)."""

    def waiting(seconds: float, why: str) -> None:
        session.report(f"turn {turn} · {why}: retrying in {seconds:.0f} s (cancel to stop)")

    messages = to_messages(convo.text)
    if memory is not None and memory.over(messages):
        session.report(f"turn {turn} · folding old turns into memory")
        if await memory.fold(convo, session.tokens, cancel=session.cancel):
            messages = to_messages(convo.text)
    token = retry_notice.set(waiting)
    try:
        started = time.perf_counter()
        reply = await _call(session, messages, turn)
        log.info("model call took %.1f ms", (time.perf_counter() - started) * 1000)
        return reply
    finally:
        retry_notice.reset(token)


async def _call(session: EditSession, messages: list[Message], turn: int) -> Reply:
    try:
        return await session.ask_model(messages, turn)
    except (ModelCancelled, asyncio.CancelledError):
        session.tokens.add_unanswered(messages)
        raise


def _truncated(finish_reason: str | None) -> str | None:
    return finish_reason if finish_reason in ("length", "max_tokens") else None


def _clean(parsed: ParsedReply) -> str:
    """The accepted actions re-serialised, without the prose or junk around them."""
    return "\n".join(action.to_tag() for action in parsed.actions)


def _keep_raw(
    session: EditSession, convo: ConversationFile, turn: int, attempt: int, text: str, parsed: ParsedReply
) -> str:
    """The raw reply in a sidecar under outputs/ (a rejected attempt, or an accepted reply recorded cleaned: attempt
    0), with a short header; the turn status or the correction points to it, and <nagent-read> reads it back."""
    kind = "raw" if attempt == 0 else f"invalid-{attempt}"
    path = session.outputs_dir() / f"{convo.path.name}.{turn}-{kind}-{uuid.uuid4().hex[:8]}.txt"
    stripped = "; ".join(n.message for n in parsed.notes) or (str(parsed.error) if parsed.error else "no actions")
    header = (
        f"# nagent-lsp: raw model reply, kept out of the conversation\n# conversation: {convo.path.name}\n"
        f"# turn: {turn}\n# utc: {utc_stamp()}\n# stripped: {' '.join(stripped.split())}\n# --- reply below ---\n"
    )
    for secret in session.secrets:
        text = text.replace(secret, "[redacted]")
    atomic_write_text(path, header + text)
    return str(path)


def _turn_status(
    session: EditSession, convo: ConversationFile, turn: int, before: tuple[int, int], telemetry: _Telemetry
) -> str:
    """This turn's tokens (all attempts) and the conversation's running totals across runs."""
    previous = last_turn_status(convo.text)
    used_in = session.tokens.input - before[0]
    used_out = session.tokens.output - before[1]
    return TurnStatus(
        utc=utc_stamp(),
        turn=(previous.turn + 1) if previous else turn,
        tokens_in=used_in,
        tokens_out=used_out,
        tokens_in_total=(previous.tokens_in_total if previous else 0) + used_in,
        tokens_out_total=(previous.tokens_out_total if previous else 0) + used_out,
        estimated=session.tokens.estimated,
        cache_read_total=(previous.cache_read_total if previous else 0)
        + session.tokens.cache_read
        - telemetry.cache_before,
        stripped_turns=(previous.stripped_turns if previous else 0) + telemetry.stripped,
        fabricated_turns=(previous.fabricated_turns if previous else 0) + telemetry.fabricated,
        raw=telemetry.raw,
    ).render()


async def run_child(parent: EditSession, action: Conversation, memory: Memory | None = None) -> str:
    """A sub-conversation: an isolated child loop with its own conversation file and the same permissions."""
    refused = _child_depth_error(parent, action)
    if refused:
        return refused
    allowed, why = await parent.policy.use(
        "conversation", (action.prompt,), "allow", parent.port, "start a sub-conversation"
    )
    if not allowed:  # the agent's `conversation` permission (DESIGN §10)
        body = conversation_result_body(1, "", f"not run: {why}")
        attrs = {"conversation": action.conversation_file or "", "tokens_in": 0, "tokens_out": 0}
        return render_result("conversation", attrs, body)
    conversations = parent.conversations_dir or (parent.state_root / "conversations")
    name = slug(action.conversation_file) if action.conversation_file else f"child-{uuid.uuid4()}"
    convo = ConversationFile.open(conversations / name, secrets=parent.secrets, deny_read=parent.settings.denyRead)
    if action.conversation_name:
        saved = conversations / "saved" / slug(action.conversation_name)
        if not saved.is_file():
            body = conversation_result_body(1, "", f"saved conversation not found: {action.conversation_name}")
            return render_result("conversation", {"conversation": name, "tokens_in": 0, "tokens_out": 0}, body)
        convo.text = saved.read_text(encoding="utf-8")
    child = parent.child()
    if parent.child_context is not None:
        convo.set_context(parent.child_context(name, "delegated"))
    convo.append(user_prompt_block(action.prompt))
    try:
        outcome = await run_loop(child, convo, memory)
        exit_code, output, err = 0, "\n".join(outcome.responses), ""
    except RunFailed as exc:
        exit_code, output, err = 1, "", str(exc)
    parent.tokens.absorb(child.tokens)
    parent.staged = child.staged  # the child edits the same staged target
    body = conversation_result_body(exit_code, output, err)
    attrs = {"conversation": name, "tokens_in": child.tokens.input, "tokens_out": child.tokens.output}
    return render_result("conversation", attrs, body)


def _child_depth_error(session: EditSession, action: Conversation) -> str | None:
    if session.depth + 1 > MAX_DEPTH:
        body = conversation_result_body(
            1, "", f"sub-conversations may nest at most {MAX_DEPTH} deep; do this task yourself"
        )
        return render_result(
            "conversation", {"conversation": action.conversation_file or "", "tokens_in": 0, "tokens_out": 0}, body
        )
    return None
