"""`nagent.edit`: a request about one file becomes a minimal, applied change and a conversation on disk."""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Callable
from pathlib import Path

import attrs

from nagent_lsp.agent.context import INLINE_LIMIT, InstanceFacts, Selection, build_initial_context
from nagent_lsp.agent.context_layers import default_layer_dirs, root_context
from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.agent.loop import RunFailed, run_loop
from nagent_lsp.agent.mcp_tools import McpTools, servers_for, tools_for_run
from nagent_lsp.agent.memory import Memory
from nagent_lsp.agent.mentions import Mention, read_mentions
from nagent_lsp.agent.permissions import ShellPermission
from nagent_lsp.agent.run import EditSession
from nagent_lsp.agent.sandbox import ReadRules
from nagent_lsp.agent.splits import StagedSplits, refresh_split
from nagent_lsp.config.agent_definitions import Agent
from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.core.model import ModelCancelled
from nagent_lsp.core.ports import ChatModel, EditorPort, FileChange, Progress
from nagent_lsp.llm.models import (
    check_configured,
    configured_model,
    model_settings,
    optional_summary_model,
    profile_price,
)
from nagent_lsp.operations.agents import applies_nothing, find_agent, policy_of, run_settings
from nagent_lsp.operations.args import EditArgs
from nagent_lsp.operations.attribution import running as attribution_run
from nagent_lsp.operations.buffers import confined_file, read_rules, read_source, read_source_async
from nagent_lsp.operations.context_info import rules_context
from nagent_lsp.operations.conversation import store_for
from nagent_lsp.operations.deliver import RunResult, conversation_record
from nagent_lsp.operations.edit_targets import refuse_state_file, with_message
from nagent_lsp.operations.main_conversation import is_main, main_ref
from nagent_lsp.operations.profiles import checked_profile, with_profile
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationRef
from nagent_lsp.store.files import file_kind
from nagent_lsp.tags import protocol_rules
from nagent_lsp.tags.transcript import INTERRUPTED, system_block, user_prompt_block

log = logging.getLogger("nagent_lsp")

CONTEXT_TIMEOUT = 10.0  # a history or summary block that takes longer is left out, never blocks the edit


@attrs.frozen
class OutsideLines:
    """The 0-based lines of one file (of the text the run started from) a run given a `range` changed outside it."""

    uri: str
    lines: list[int]


@attrs.frozen(kw_only=True)
class EditResult(RunResult):
    """`nagent.edit` (and `nagent.instruction.apply`): a run's result; `outsideSelection`/`outsideLines` when it was
    given a `range` and its change set reaches beyond those lines."""

    outsideSelection: bool | None = None
    outsideLines: list[OutsideLines] | None = None
    mentions: list[Mention] | None = None  # the request's `@path` mentions, included or not (agent.mentions)
    request: str | None = None  # `nagent.conversation.send`: the draft that was run as the request


def target_path(session: Session, uri: str) -> Path:
    """The file `uri` names, if the read rules allow it (inside the workspace, no denyRead match such as
    `.env`, a regular file of at most maxFileBytes); nothing of a refused file reaches the model."""
    if uri_to_path(uri) is None:
        raise UserError(
            f"nagent.edit works on saved files; save {uri} first (its conversation is kept under its URI until then)"
        )
    path, rules = confined_file(session, uri)
    refuse_state_file(session, path)  # a conversation, a proposal…: nagent's own files are never edit targets
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(
            "uri", f"{path} is {file_kind(st.st_mode)}, not a regular file; only regular files are edited"
        )
    if st.st_size > rules.max_bytes:
        raise InvalidArgument("uri", rules.too_large(path, st.st_size, rules.max_bytes))
    return path


def read_text(port: EditorPort, path: Path, rules: ReadRules | None = None) -> tuple[str, int | None]:
    buffer = read_source(port, path, rules)
    return buffer.text, buffer.version


def selection_of(text: str, rng: dict | None) -> Selection | None:
    if not rng:
        return None
    try:
        start, end = rng["start"], rng["end"]
        sl, sc, el, ec = int(start["line"]), int(start["character"]), int(end["line"]), int(end["character"])
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument("range", "expected {start: {line, character}, end: {line, character}}") from None
    if (el, ec) < (sl, sc) or sl < 0:
        raise InvalidArgument("range", "end must not come before start")
    lines = text.splitlines(keepends=True)
    # Character offsets are taken per line in code points: close enough for showing the model what was selected.
    chosen = "".join(lines[sl : el + 1])
    if sl == el:
        chosen = chosen[sc:ec]
    elif chosen:
        chosen = chosen[sc:]
        cut = len(lines[el]) - ec if el < len(lines) else 0
        chosen = chosen[: len(chosen) - cut] if cut > 0 else chosen
    return Selection(chosen, sl, sc, el, ec)


async def edit(
    session: Session,
    port: EditorPort,
    args: EditArgs,
    finish: Callable[[str], str] | None = None,
    conversation: Callable[[str], str] | None = None,
    main: Path | None = None,
) -> EditResult:
    """`finish` post-processes the staged text before delivery (the code-action path removes its comment);
    `conversation` rewrites the conversation's text as the run reads it, under the run lock
    (`nagent.conversation.send` takes out the draft that became the request). `main`: a workspace folder — the
    request runs in that folder's main conversation (operations.main_conversation), with no target file;
    `args.uri` is then not read."""
    if not args.request.strip():
        raise InvalidArgument("request", "must not be blank")
    selection_of("", args.range)  # a malformed range is refused before anything starts
    profile = checked_profile(session.settings, args.profile)
    check_configured(model_settings(session.settings, profile), session.environ)  # "no model" first
    # Main mode: `path` is the workspace folder; it is never read nor written as a file (EditSession.main).
    path = main if main is not None else target_path(session, args.uri)
    agent = with_profile(session.settings, find_agent(session, session.state_root(path).path, args.agent), profile)
    settings = run_settings(session.settings, agent)  # the agent's model, temperature and maxSteps
    model = configured_model(settings, session.environ)
    model.prepare()  # the SDK's client is made in a thread while the run reads its context
    attribution_run(settings, agent.name)  # issue 27: the ledger names the run's model and agent
    if applies_nothing(agent):
        finish = None  # plan/explain change nothing, not even the comment that asked for them
    store = store_for(session, path)  # one store per state root for the server's life: its locks serialise runs
    state_root = store.state_root
    ref = main_ref(session, path) if main is not None else store.resolve(path)
    async with store.lock_for(ref):
        # The editor's progress is created (a round trip to it) while the run reads its context (issue 29).
        begun = asyncio.ensure_future(port.begin_progress(f"nagent: {path.name}"))
        try:
            async with tools_for_run(servers_for(port, settings.mcpServers), settings.tools) as tools:
                result = await _run(
                    session, port, args, model, path, state_root, ref, finish, begun, agent, settings, conversation,
                    tools,
                )  # fmt: skip
            return with_message(result, path.name)
        finally:
            port.end_progress(await begun)  # a no-op when the run already ended it with its outcome
            await model.aclose()


async def _run(
    session: Session,
    port: EditorPort,
    args: EditArgs,
    model: ChatModel,
    path: Path,
    state_root: Path,
    ref: ConversationRef,
    finish: Callable[[str], str] | None,
    begun: asyncio.Future[Progress],
    agent: Agent,
    settings: Settings,
    conversation: Callable[[str], str] | None = None,
    tools: McpTools | None = None,
) -> EditResult:
    policy = policy_of(agent)
    rules = read_rules(session, path)
    main = is_main(ref)  # no target file: nothing of one is read, staged or described (only the workspace fact)
    base = None if main else await read_source_async(port, path, rules)
    base_text, base_version = (base.text, base.version) if base is not None else ("", None)
    folders = list(rules.folders)
    secrets = tuple(filter(None, [settings.api_key(session.environ)]))
    convo = ConversationFile.open(ref.conversation_path, port, secrets, deny_read=settings.denyRead)
    if conversation is not None:
        convo.text = conversation(convo.text)  # written whole with the first append
    team_rules = rules_context(session, path)  # AGENTS.md & co. (agent.rules_files), read once per run

    def context_for(conversation: str, invocation: str, with_target: bool = True) -> str:
        facts = InstanceFacts.gather(
            target_path="" if main else str(path),  # "": agent.context writes the main-conversation fact instead
            file_id=ref.file_id,
            conversation=conversation,
            workspace_root=str(folders[0]),
            state_root=str(state_root),
            invocation=invocation,
            parent_conversation=ref.conversation if invocation == "delegated" else None,
        )
        small = len(base_text.encode("utf-8")) <= INLINE_LIMIT
        return build_initial_context(
            protocol_rules(),
            root_context(default_layer_dirs(state_root)),
            facts,
            file_history=extras.get("history", ""),
            file_summary=extras.get("summary", ""),
            selection=selection_of(base_text, args.range) if with_target and not main else None,
            target_text=base_text if (small and with_target and not main) else None,
            target_version=base_version,
            agent=(agent.name, agent.instructions) if agent.instructions else None,
            rules_files=team_rules,
            tools=tools.describe() if tools is not None else "",
        )

    # Whether git shares the conversation (its secrets are then redacted) is asked beside the context's reads.
    guard = asyncio.ensure_future(asyncio.to_thread(convo.guard.prepare))
    extras = {} if main else await _context_extras(session, path, base_text)  # a file's history and summary
    await guard
    convo.set_context(context_for(ref.conversation, "user"), save=False)
    convo.append(user_prompt_block(args.request))  # one write for both
    progress = await begun
    run = EditSession(
        port=port,
        settings=settings,
        policy=policy,
        permission=ShellPermission(policy),
        write_permission=policy.write_check(folders, port),
        state_root=state_root,
        folders=folders,
        target=path,
        file_id=ref.file_id,
        staged=base_text,
        complete=model.complete,
        cancel=progress.cancel,
        progress=progress,
        conversations_dir=ref.conversation_path.parent,
        child_context=lambda name, invocation: context_for(name, invocation, with_target=False),
        secrets=secrets,
        base_text=base_text,
        mcp=tools,
        main=main,
    )
    mentioned = read_mentions(args.request, run.read_rules(), port, folders[0] if folders else path.parent)
    convo.append(*mentioned.blocks)  # recorded after the request, as the reads a model would have asked for
    run.tokens.price = profile_price(session.settings, agent.model)  # DESIGN §11: tokens.cost
    run.tokens.memory_price = profile_price(session.settings, session.settings.summaryModel)
    memory = Memory(
        settings.conversation.tokenBudget, lambda: optional_summary_model(session.settings, session.environ, "memory")
    )
    result = EditResult(
        conversation=conversation_record(ref), tokens=run.tokens.counts(), mentions=mentioned.mentions or None
    )
    # The run's appends are written at once and made durable in a worker thread while it goes on; the result (what
    # tells the caller the edit happened) waits for them, so fsyncs no longer hold the edit back on its way to the
    # editor (issue 29), and a crash of the server loses no reply (each is written before the run goes on).
    convo.defer_syncs()
    try:
        return await _converse(
            session, port, args, run, convo, memory, result, path, state_root, base_text, base_version, progress, finish
        )
    finally:
        await convo.synced()


async def _converse(
    session: Session,
    port: EditorPort,
    args: EditArgs,
    run: EditSession,
    convo: ConversationFile,
    memory: Memory,
    result: EditResult,
    path: Path,
    state_root: Path,
    base_text: str,
    base_version: int | None,
    progress: Progress,
    finish: Callable[[str], str] | None,
) -> EditResult:
    """The model loop, then the delivery of its change set."""
    try:
        outcome = await run_loop(run, convo, memory)
    except (ModelCancelled, asyncio.CancelledError) as exc:
        convo.append(INTERRUPTED)
        port.end_progress(progress, "cancelled")
        if isinstance(exc, asyncio.CancelledError) and not isinstance(exc, ModelCancelled):
            raise
        return attrs.evolve(result, tokens=run.tokens.counts(), reason="cancelled")
    except RunFailed as exc:
        port.end_progress(progress, "failed")
        raise UserError(str(exc)) from None
    finally:
        await memory.aclose()
    result = attrs.evolve(result, response="\n\n".join(outcome.responses), tokens=run.tokens.counts())
    pending = run.splits.pending()
    if pending:
        names = ", ".join(p.name for p in pending[:10]) + (" …" if len(pending) > 10 else "")
        convo.append(
            system_block(
                f"Segment edits never merged with <nagent-file-patch> are not part of the change and were "
                f"discarded: {names}."
            )
        )
    if outcome.stopped_by_limit:
        result = attrs.evolve(result, reason=f"stopped after maxSteps={run.settings.maxSteps} turns")
    if finish is not None:
        run.staged = finish(run.staged)
    return await _deliver(session, port, args, run, convo, result, path, state_root, base_text, base_version, progress)


async def _deliver(
    session: Session,
    port: EditorPort,
    args: EditArgs,
    run: EditSession,
    convo: ConversationFile,
    result: EditResult,
    path: Path,
    state_root: Path,
    base_text: str,
    base_version: int | None,
    progress: Progress,
) -> EditResult:
    """DESIGN §9: the run's change set (the target and every other file it wrote or created) is applied as one
    change, or kept as a proposal awaiting review (`confirmEdits`, `preview`)."""
    from nagent_lsp.operations.deliver import deliver_or_propose

    changes = _change_set(run, args.uri, path, base_text, base_version)
    if not changes:
        result = attrs.evolve(result, files=[], reason=result.reason if result.reason is not None else "no change")
        port.end_progress(progress, "no change")
        return result
    if args.range:
        outside = outside_selection(args.range, changes, path)
        if outside:
            result = attrs.evolve(result, outsideSelection=True, outsideLines=outside)
    preview = args.preview if args.preview is not None else session.settings.confirmEdits
    # A proposal names one file as its target; the main conversation has none, so its first changed file stands in.
    proposal_target = changes[0].path if run.main else path
    delivery = await deliver_or_propose(
        session, port, state_root, changes, target=proposal_target, request=args.request, convo=convo,
        conversation=result.conversation, progress=progress, preview=preview,
    )  # fmt: skip
    result = result.delivered(delivery)
    final = delivery.final_text(path)
    if final is not None:
        await _refresh_splits(run.splits, path, final)
    return result


def _change_set(run: EditSession, uri: str, path: Path, base_text: str, base_version: int | None) -> list[FileChange]:
    """The target first (when it changed), then every other changed or new file, in the order first written."""
    changes = []
    if run.staged != base_text:
        changes.append(
            FileChange(path=path, uri=uri, base_text=base_text, new_text=run.staged, base_version=base_version)
        )
    for staged in run.changes.changed():
        if staged.path == path:
            continue
        changes.append(
            FileChange(
                path=staged.path,
                uri=staged.uri,
                base_text=staged.base_text,
                new_text=staged.text,
                base_version=staged.base_version,
                created=staged.created,
            )
        )
    return changes


def outside_selection(rng: dict, changes: list[FileChange], target: Path) -> list[OutsideLines]:
    """`outsideLines` of a run given a `range`: per file, the 0-based lines (of the text the run started from) that
    changed outside the selected lines — every changed line of another file. An insertion counts as its line."""
    from nagent_lsp.text.merge import line_hunks

    first, last = int(rng["start"]["line"]), int(rng["end"]["line"])
    if last > first and int(rng["end"]["character"]) == 0:
        last -= 1  # a selection ending at the start of a line does not hold that line
    found = []
    for change in changes:
        lines: list[int] = []
        for hunk in line_hunks(change.base_text, change.new_text):
            for line in range(hunk.start, max(hunk.end, hunk.start + 1)):
                if change.path != target or not first <= line <= last:
                    lines.append(line)
        if lines:
            found.append(OutsideLines(change.uri, sorted(set(lines))))
    return found


async def _refresh_splits(splits: StagedSplits, target: Path, final: str) -> None:
    """After the change is applied: the target's split folders the run used describe the applied text.

    The run's segment edits are never written as such (DESIGN §12: a run's segment edits are visible to that run
    alone until its change is applied). What is applied is the merged text, so each split folder of the target
    that the run read or merged is re-split from it: its segment files then hold exactly what the editor holds,
    and the next run reuses the split instead of making another. Splits made in memory only are dropped; the
    target's other splits are left as they are (a hash check guards them)."""
    for index_path in sorted(splits.used & splits.on_disk):
        split = splits.splits.get(index_path)
        if split is None or split.source != target:
            continue
        try:
            await asyncio.to_thread(refresh_split, index_path, final)
        except (OSError, ValueError) as exc:  # the split is a cache: a failure here must not fail the edit
            log.info("could not refresh %s: %s", index_path, exc)


async def _context_extras(session: Session, path: Path, text: str) -> dict[str, str]:
    """The {file-history} block (git, in a thread, bounded in time) and the cached {file-summary} of `text`, read
    side by side (issue 29: each is a thread hop and some I/O the other need not wait for)."""
    from nagent_lsp.operations.history import file_history_block
    from nagent_lsp.operations.summarize import file_summary_block

    history, summary = await asyncio.gather(
        asyncio.wait_for(asyncio.to_thread(file_history_block, session, path), CONTEXT_TIMEOUT),
        asyncio.to_thread(file_summary_block, session, path, text),
        return_exceptions=True,
    )
    extras: dict[str, str] = {}
    if isinstance(history, BaseException):
        if not isinstance(history, Exception):
            raise history  # a cancellation (KeyboardInterrupt…) is not a missing context
        log.info("no history context for %s: %s", path, history)  # context is a help, not a precondition
    else:
        extras["history"] = history
    if isinstance(summary, BaseException):
        if not isinstance(summary, OSError):
            raise summary
        log.info("no summary context for %s: %s", path, summary)
    else:
        extras["summary"] = summary
    return extras
