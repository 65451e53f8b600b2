"""Which request wrote this line (issue 27): the ledger of applied runs (store/attribution_ledger.py), the lines it
follows through the user's later edits, `nagent.attribution.at`, the hover card's line, `nagent-lsp blame`, and
Git AI v3.0.0 authorship logs under `refs/notes/ai` (history/ai_notes.py) for every new HEAD.

How lines are followed: a file's track is its text as last seen (a hash per line) and the run that wrote each
line. Any newer text (the buffer at a hover, the disk at a save, a commit's blob) is diffed against it
(text.edits.line_opcodes): a line in an unchanged stretch keeps its owner; a line in a changed stretch is not
nagent's any more, and an owned line that disappeared that way counts as overridden. An applied run first
carries the track to the text it was applied over, then owns the lines it inserted or changed.

Notes: when HEAD moves (history.index_keeper notices; the first query after a start looks too), every commit since
the last HEAD seen that has no log gets one covering the lines it added that the track still gives to a run. An
amend or rebase makes new commits, which get theirs the same way; a commit made while no server ran is found at
the next start. `attribution.notes: "off"` writes none.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import FileOutcome
from nagent_lsp.history.ai_notes import SESSION_KEY, AiNotes, new_trace, render_log, session_id
from nagent_lsp.history.git import GitError, GitRepository, MissingObjects
from nagent_lsp.history.refs import read_head
from nagent_lsp.operations.args import AttributionArgs
from nagent_lsp.operations.session import Session
from nagent_lsp.store.attribution_ledger import Ledger, RunRecord, Track, line_hash
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.tags.transcript import USER_PROMPT, parse_blocks
from nagent_lsp.text.edits import line_opcodes

if TYPE_CHECKING:
    from nagent_lsp.history.service import HistoryService

log = logging.getLogger("nagent_lsp")

TOOL = "nagent"
NOTE_COMMITS = 50  # commits looked at per HEAD move, at most (a long rebase beyond it keeps its older logs)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@attrs.frozen
class RunInfo:
    """The model and agent of the run being delivered (set by the edit run; absent: the settings' model)."""

    model: str
    agent: str | None = None


RUN: ContextVar[RunInfo | None] = ContextVar("nagent_attribution_run", default=None)


def running(settings: Settings, agent: str | None) -> None:
    """The run in this task uses `settings`' model (a profile's model id when it names one) as `agent`."""
    profile = settings.models.get(settings.model)
    RUN.set(RunInfo(profile.model if profile is not None else settings.model, agent))


@attrs.frozen
class Attribution:
    """Who wrote a line: `source` "nagent" (the ledger), "notes" (a tool's log in refs/notes/ai) or "git" (the
    commit only). `message` is the one line to show."""

    source: Literal["nagent", "notes", "git"]
    tool: str
    message: str
    model: str | None = None
    agent: str | None = None
    sessionId: str | None = None
    conversationPath: str | None = None
    conversationUri: str | None = None
    turn: int | None = None
    conversationLine: int | None = None
    request: str | None = None
    time: str | None = None
    commit: str | None = None


@attrs.frozen
class AttributionResult:
    attribution: Attribution | None = attrs.field(default=None, metadata={"null": True})


# -- the ledgers, one per state root ---------------------------------------------------------------------------------

_ledgers: dict[str, Ledger] = {}
_lock = threading.Lock()
_pool = ThreadPoolExecutor(1, thread_name_prefix="nagent-attribution")


def ledger_of(state_root: Path) -> Ledger:
    with _lock:
        found = _ledgers.get(str(state_root))
        if found is None:
            found = _ledgers[str(state_root)] = Ledger(state_root)
        return found


def lines_of(text: str) -> list[str]:
    """A text's lines without their endings, as git numbers them (a final newline ends the last line)."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def hashes_of(text: str) -> list[str]:
    return [line_hash(line) for line in lines_of(text)]


def carry(track: Track, hashes: list[str]) -> tuple[Track, Counter[str]]:
    """The track moved to a newer text: owners kept on unchanged stretches; owned lines lost, counted per run."""
    owners: list[str | None] = [None] * len(hashes)
    lost: Counter[str] = Counter()
    prev_i = prev_j = 0
    old = track.owners
    for i1, i2, j1, j2 in [*line_opcodes(track.hashes, hashes), (len(old), len(old), len(hashes), len(hashes))]:
        owners[prev_j:j1] = old[prev_i:i1]
        lost.update(o for o in old[i1:i2] if o)
        prev_i, prev_j = i2, j2
    return Track(list(hashes), owners), lost


def changed_lines(old: list[str], new: list[str]) -> list[int]:
    """0-based lines of `new` inserted or changed relative to `old`."""
    return [j for _i1, _i2, j1, j2 in line_opcodes(old, new) for j in range(j1, j2)]


def _ranges(lines: Sequence[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for line in sorted(lines):
        if out and out[-1][1] == line:
            out[-1][1] = line + 1
        else:
            out.append([line + 1, line + 1])
    return out


# -- recording what a run applied -------------------------------------------------------------------------------------


def note_proposed(session: Session, state_root: Path, conversation: str, request: str) -> None:
    """A run's change set became a proposal: remember its model and agent for when the review applies it."""
    info = RUN.get() or RunInfo(session.settings.model)
    record = {"type": "proposed", "conversation": conversation, "request": request[:2000], "model": info.model}
    try:
        ledger_of(state_root).append({**record, "agent": info.agent})
    except OSError as exc:
        log.info("attribution: cannot record the proposal's model: %s", exc)


def _conversation_file(state_root: Path, conversation: str) -> Path | None:
    for folder in ("conversations", "conversations/local"):
        candidate = state_root / folder / conversation
        if candidate.is_file():
            return candidate
    return None


def _turn_of(path: Path | None, request: str) -> tuple[int | None, int | None]:
    """(1-based turn, 0-based line) of the last user prompt holding `request` in the conversation (else the last)."""
    if path is None:
        return None, None
    try:
        text = read_disk_text(path)
    except Exception:  # noqa: BLE001 - a missing turn is shown as unknown, never a failed apply
        return None, None
    prompts = [b for b in parse_blocks(text) if b.kind == USER_PROMPT]
    if not prompts:
        return None, None
    wanted = request.strip()
    index = max((i for i, b in enumerate(prompts) if (b.body or "").strip() == wanted), default=len(prompts) - 1)
    return index + 1, text.count("\n", 0, prompts[index].start)


def _run_info(session: Session, ledger: Ledger, conversation: str, request: str) -> RunInfo:
    info = RUN.get()
    if info is not None:
        return info
    found = ledger.proposed.get((conversation, request[:2000]))
    return RunInfo(found[0], found[1]) if found else RunInfo(session.settings.model)


async def record_applied(
    session: Session, state_root: Path, files: Sequence[FileOutcome], *, target: Path, request: str, conversation: str
) -> None:
    """An applied change set's lines, per file, into the ledger (off the event loop). Never fails the apply."""
    import asyncio

    info = RUN.get()
    try:
        await asyncio.to_thread(_record, session, state_root, list(files), target, request, conversation, info)
    except Exception as exc:  # noqa: BLE001 - attribution is a record, never a reason to fail an applied change
        log.warning("attribution: could not record the applied change: %s", exc)


def _record(
    session: Session,
    state_root: Path,
    files: list[FileOutcome],
    target: Path,
    request: str,
    conversation: str,
    info: RunInfo | None,
) -> None:
    ledger = ledger_of(state_root)
    token = RUN.set(info)
    try:
        run = _run_info(session, ledger, conversation, request)
    finally:
        RUN.reset(token)
    convo = _conversation_file(state_root, conversation)
    turn, convo_line = _turn_of(convo, request)
    trace = new_trace()
    now = int(time.time())
    try:
        shown = str(target.relative_to(state_root.parent))
    except ValueError:
        shown = target.name
    for outcome in files:
        path = str(outcome.path)
        base, final = hashes_of(outcome.base_text), hashes_of(outcome.final_text)
        track = ledger.track(path) or Track(base, [None] * len(base))
        track, lost = carry(track, base)  # the user's edits since the track was last seen
        for owner, count in lost.items():
            ledger.add_override(owner, path, count, now)
        track, _replaced = carry(track, final)  # lines this run rewrote are its own now, not "overridden"
        written = changed_lines(base, final)
        for j in written:
            track.owners[j] = trace
        ledger.save_track(path, track)
        first = request.strip().splitlines()[0][:200] if request.strip() else ""
        ledger.add_run(
            RunRecord(
                trace=trace,
                conversation=conversation,
                conversationPath=str(convo) if convo else "",
                fileId=_file_id(conversation),
                target=shown,
                path=path,
                turn=turn,
                conversationLine=convo_line,
                request=first,
                model=run.model,
                agent=run.agent,
                time=now,
                lines=_ranges(written),
            )
        )
    _remember_head(session, ledger, files)


def _file_id(conversation: str) -> str:
    stem = conversation.rsplit(".", 1)[0]
    return stem.rsplit("-", 1)[-1] if "-" in stem else stem


def _remember_head(session: Session, ledger: Ledger, files: list[FileOutcome]) -> None:
    """The HEAD before any commit holding these lines: where the next note search starts."""
    from nagent_lsp.config.state_root import git_toplevel

    for outcome in files[:1]:
        top = git_toplevel(str(outcome.path.parent))
        if top is None:
            continue
        root = os.path.realpath(top)
        head = read_head(Path(root))
        if head and ledger.synced_head(root) is None:
            ledger.set_synced_head(root, head)


def observed(session: Session, path: Path, text: str) -> None:
    """The file's text was saved (or written): carry its track there, counting the lines the user rewrote."""
    ledger = ledger_of(session.state_root(path).path)
    track = ledger.track(str(path))
    if track is None:
        return
    moved, lost = carry(track, hashes_of(text))
    if moved.hashes == track.hashes:
        return
    now = int(time.time())
    for owner, count in lost.items():
        ledger.add_override(owner, str(path), count, now)
    ledger.save_track(str(path), moved)


# -- reading: which run wrote a line -----------------------------------------------------------------------------------


def service_for(session: Session, path: Path) -> tuple[HistoryService, str] | None:
    """The repository's history service (its git) and the file's path in it; None outside git or the read rules.
    Never starts an index build: attribution needs git, not the history index."""
    from nagent_lsp.config.state_root import git_toplevel
    from nagent_lsp.history.service import HistoryService as Service
    from nagent_lsp.operations.buffers import read_rules

    path = Path(os.path.abspath(path))
    if not read_rules(session, path).allows(path):
        return None
    top = git_toplevel(str(path.parent))
    if top is None:
        return None
    root = Path(os.path.realpath(top))
    try:
        rel = Path(os.path.realpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None
    if rel.startswith(".git/"):
        return None
    service = session.history_service(root, session.state_dir(path, "cache"))
    assert isinstance(service, Service)
    watch(session, service)
    return service, rel


# path -> (key, owners, the track they were computed from: held so its id, in the key, is never reused)
_owners_cache: dict[str, tuple[tuple[object, ...], list[str | None], Track]] = {}


def owners_in(ledger: Ledger, path: Path, text: str) -> list[str | None] | None:
    """Each line of `text` (the buffer or the disk): the trace that wrote it, or None. None: nothing tracked."""
    track = ledger.track_cached(str(path))
    if track is None:
        return None
    key = (id(track), len(text), hash(text))
    cached = _owners_cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    owners = carry(track, hashes_of(text))[0].owners
    if len(_owners_cache) > 64:
        _owners_cache.clear()
    _owners_cache[str(path)] = (key, owners, track)
    return owners


def _day(epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def from_run(record: RunRecord) -> Attribution:
    convo = record.conversationPath or None
    turn = f"turn {record.turn} of " if record.turn else ""
    message = (
        f"written by nagent: {turn}{Path(record.target).name}'s conversation — '{record.request}' "
        f"({record.model}, {_day(record.time)})"
    )
    return Attribution(
        source="nagent",
        tool=TOOL,
        message=message,
        model=record.model,
        agent=record.agent,
        sessionId=session_id(TOOL, record.conversation),
        conversationPath=convo,
        conversationUri=Path(convo).as_uri() if convo else None,
        turn=record.turn,
        conversationLine=record.conversationLine,
        request=record.request,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.time)),
    )


def nagent_attribution(session: Session, path: Path, line: int, text: str | None) -> Attribution | None:
    """The ledger's answer for 0-based `line` of `path` as `text` holds it (None: the disk's text)."""
    ledger = ledger_of(session.state_root(path).path)
    if ledger.track_cached(str(path)) is None:
        return None
    if text is None:
        try:
            text = read_disk_text(path, limit=session.settings.maxFileBytes)
        except Exception:  # noqa: BLE001 - unreadable: nothing to attribute
            return None
    owners = owners_in(ledger, path, text)
    if owners is None or not 0 <= line < len(owners) or owners[line] is None:
        return None
    records = ledger.runs().get(owners[line] or "", [])
    record = next((r for r in records if r.path == str(path)), records[0] if records else None)
    return from_run(record) if record is not None else None


def foreign_attribution(notes: AiNotes, commit: str, path: str, line: int) -> Attribution | None:
    """What `commit`'s authorship log says of 1-based `line` of `path` as committed there (any tool's)."""
    authorship = notes.read(commit)
    if authorship is None:
        return None
    key = authorship.key_at(path, line)
    if key is None:
        return None
    sessions, humans = authorship.section("sessions"), authorship.section("humans")
    prompts = authorship.section("prompts")
    if key.startswith("h_"):
        author = str(humans.get(key, {}).get("author", "a person"))
        return Attribution("notes", "human", f"written by {author} (authorship log of {commit[:7]})", commit=commit)
    sid = key.split("::", 1)[0]
    record = sessions.get(sid) or prompts.get(key) or {}
    agent_id = record.get("agent_id") if isinstance(record.get("agent_id"), dict) else {}
    assert isinstance(agent_id, dict)
    tool, model = str(agent_id.get("tool") or "an AI tool"), agent_id.get("model")
    shown = f"session {sid}" if SESSION_KEY.match(key) else f"prompt {key}"
    message = f"written by {tool}" + (f", model {model}" if model else "") + f", {shown} (commit {commit[:7]})"
    return Attribution("notes", tool, message, model=str(model) if model else None, sessionId=sid, commit=commit)


def attribution_at(session: Session, args: AttributionArgs, text: str | None = None) -> AttributionResult:
    """`nagent.attribution.at`: the ledger first (what nagent wrote, committed or not), then the repository's
    authorship logs for the commit that last changed the line, then that commit."""
    from nagent_lsp.operations.buffers import confined_file

    if args.line < 0:
        from nagent_lsp.core.errors import InvalidArgument

        raise InvalidArgument("line", "must be 0 or more")
    path, _rules = confined_file(session, args.uri)
    located = service_for(session, path)
    if located is not None:  # a commit since the last look gets its log first
        sync_notes(session, located[0].root, located[0].git)
    return AttributionResult(line_attribution(session, path, args.line, text, git_too=True))


def line_attribution(
    session: Session, path: Path, line: int, text: str | None, *, git_too: bool = False
) -> Attribution | None:
    found = nagent_attribution(session, path, line, text)
    if found is not None:
        return found
    located = service_for(session, path)
    if located is None:
        return None
    service, rel = located
    sync_notes(session, service.root, service.git)
    if text is None:
        try:
            text = read_disk_text(path, limit=session.settings.maxFileBytes)
        except Exception:  # noqa: BLE001
            return None
    head_line = head_line_of(service.git, service.root, rel, text, line)
    if head_line is None:
        return None
    origin = _origin(service.git, rel, head_line)
    if origin is None:
        return None
    commit, origin_path, origin_line = origin
    notes = notes_of(service.git)
    if notes.has(commit):
        found = foreign_attribution(notes, commit, origin_path, origin_line)
        if found is not None:
            return found
    if git_too and not commit.startswith("0000000"):
        return Attribution("git", "git", f"last changed in commit {commit[:7]}", commit=commit)
    return None


_origins: dict[tuple[str, str, str, int], tuple[str, str, int] | None] = {}


def _origin(git: GitRepository, rel: str, line: int) -> tuple[str, str, int] | None:
    head = read_head(git.root) or "HEAD"
    key = (str(git.root), head, rel, line)
    if key not in _origins:
        if len(_origins) > 4096:
            _origins.clear()
        _origins[key] = git.line_origin(rel, head, line)
    return _origins[key]


# -- the buffer's lines mapped to HEAD's (issue 25 item 7) -----------------------------------------------------------

# Keyed by file, not by (HEAD, file): one entry per file whatever the number of HEAD moves (issue 29: a (HEAD, file)
# key kept a copy of each hovered file's line hashes for every commit and branch it was hovered at, up to 64 of them).
_head_lines: dict[tuple[str, str], tuple[str, list[str]]] = {}
_maps: dict[tuple[str, str], tuple[tuple[str, int, int], list[int | None]]] = {}


def head_line_of(git: GitRepository, root: Path, rel: str, text: str, line: int) -> int | None:
    """The 1-based line of HEAD's blob that 0-based buffer `line` is (None: a line added or changed since HEAD).
    HEAD's lines are read once per (HEAD, file); the map once per buffer text."""
    head = read_head(root)
    if head is None:
        return None
    key = (str(root), rel)
    held = _head_lines.get(key)
    if held is None or held[0] != head:
        blob = git.blob_at(head, rel)
        if blob is None:
            return None
        held = (head, hashes_of(blob.decode("utf-8", "surrogateescape")))
        if len(_head_lines) > 64:
            _head_lines.clear()
        _head_lines[key] = held
    theirs = held[1]
    stamp = (head, len(text), hash(text))
    cached = _maps.get(key)
    if cached is None or cached[0] != stamp:
        ours = hashes_of(text)
        mapping: list[int | None] = [None] * len(ours)
        prev_i = prev_j = 0
        for _i1, i2, j1, j2 in [*line_opcodes(theirs, ours), (len(theirs), len(theirs), len(ours), len(ours))]:
            for k in range(j1 - prev_j):
                mapping[prev_j + k] = prev_i + k + 1
            prev_i, prev_j = i2, j2
        if len(_maps) > 64:
            _maps.clear()
        cached = _maps[key] = (stamp, mapping)
    mapping = cached[1]
    return mapping[line] if 0 <= line < len(mapping) else None


# -- the hover card's line --------------------------------------------------------------------------------------------


def hover_line(session: Session, path: Path, line: int, text: str | None, commit: str | None = None) -> str:
    """Markdown for the hover card (0-based `line`): "written by …" and a link that opens the conversation at the
    turn (a VS Code command link; other editors get the path and line). "" when nothing attributes the line.
    `commit`: the one blame gives the line (the card's); only when it has an authorship log is git asked more."""
    try:
        found = nagent_attribution(session, path, line, text)
        if found is None and commit is not None:
            found = _foreign_for_hover(session, path, line, text, commit)
    except (GitError, OSError) as exc:
        log.debug("attribution for the hover of %s failed: %s", path, exc)
        return ""
    if found is None:
        return ""
    shown = _md(found.message)
    if found.conversationPath:
        args = urllib.parse.quote(json.dumps({"uri": path.as_uri(), "line": line}))
        where = f"{found.conversationPath}:{(found.conversationLine or 0) + 1}"
        shown += f" · [open the conversation](command:nagent.openAttribution?{args}) · `{where}`"
    return shown


def _foreign_for_hover(session: Session, path: Path, line: int, text: str | None, commit: str) -> Attribution | None:
    from nagent_lsp.config.state_root import git_toplevel

    top = git_toplevel(str(path.parent))
    service = session.history_service_of(Path(os.path.realpath(top))) if top else None
    if service is None or not notes_of(service.git).has(commit):
        return None  # the line's commit has no authorship log: no git process, nothing more to read
    return line_attribution(session, path, line, text)


_MD = str.maketrans({ch: "\\" + ch for ch in "\\`*_[]<>|#"})


def _md(text: str) -> str:
    return text.translate(_MD)


# -- notes for new commits ---------------------------------------------------------------------------------------------

_notes: dict[str, AiNotes] = {}


def notes_of(git: GitRepository) -> AiNotes:
    """One reader per repository, so its listing and parsed logs stay cached between hovers."""
    with _lock:
        found = _notes.get(str(git.root))
        if found is None:
            found = _notes[str(git.root)] = AiNotes(git)
        return found


_watched: set[int] = set()
_sync_lock = threading.Lock()


def watch(session: Session, service: HistoryService) -> None:
    """Follow this history service's HEAD moves (once per service), and look for unnoted commits now."""
    if id(service) in _watched:
        return
    _watched.add(id(service))
    root, git = service.root, service.git

    def moved(_head: str | None) -> None:
        _pool.submit(_sync_quietly, session, root, git)

    service.keeper.head_listeners.append(moved)
    _pool.submit(_sync_quietly, session, root, git)


def _sync_quietly(session: Session, root: Path, git: GitRepository) -> None:
    try:
        sync_notes(session, root, git)
    except Exception as exc:  # noqa: BLE001 - a note not written is retried at the next HEAD move
        log.info("attribution: notes for %s not written: %s", root, exc)


def _user(git: GitRepository) -> str | None:
    entries = {e.key: e.value for e in git.config()}
    name, email = entries.get("user.name"), entries.get("user.email")
    return f"{name} <{email}>" if name and email else None


def sync_notes(session: Session, root: Path, git: GitRepository) -> list[str]:
    """Write an authorship log for every commit since the last HEAD seen that lacks one; returns those commits."""
    if getattr(session.settings, "attribution", None) is not None and session.settings.attribution.notes == "off":
        return []
    with _sync_lock:
        ledger = ledger_of(session.state_root(root / ".").path)
        head = read_head(root)
        key = str(root)
        synced = ledger.synced_head(key)
        if head is None or synced is None or head == synced:
            return []
        commits = git.new_commits(head, [synced], NOTE_COMMITS)
        notes = notes_of(git)
        listing = notes.listing()
        todo = [c for c in reversed(commits) if c not in listing]
        tracked = [p for p in ledger.tracked_paths() if _inside(root, p)]
        written: dict[str, str] = {}
        for commit in todo:
            text = _log_for(ledger, git, root, commit, tracked)
            if text is not None:
                written[commit] = text
        if written:
            notes.write(written)
        if tracked and head in commits:
            _carry_to(ledger, git, root, head, tracked)
        ledger.set_synced_head(key, head)
        return list(written)


def _inside(root: Path, path: str) -> bool:
    return path.startswith(str(root) + os.sep)


def _log_for(ledger: Ledger, git: GitRepository, root: Path, commit: str, tracked: list[str]) -> str | None:
    chain, email = git.commit_parents(commit)
    mine = {e.key: e.value for e in git.config()}.get("user.email")
    if mine and email and email.lower() != mine.lower():
        return None  # a teammate's commit (pulled, merged): what nagent wrote here is in this user's commits
    parent = chain[1] if len(chain) > 1 else None
    rels = {p: Path(p).relative_to(root).as_posix() for p in tracked}
    names = [f"{commit}:{r}" for r in rels.values()] + ([f"{parent}:{r}" for r in rels.values()] if parent else [])
    blobs = git.cat_blobs(names)
    runs = ledger.runs()
    files: dict[str, dict[str, list[int]]] = {}
    sessions: dict[str, dict[str, object]] = {}
    human = _user(git)
    for path, rel in rels.items():
        now = blobs.get(f"{commit}:{rel}")
        before = blobs.get(f"{parent}:{rel}") if parent else None
        track = ledger.track(path)
        if now is None or now == before or track is None:
            continue
        hashes = hashes_of(now.decode("utf-8", "surrogateescape"))
        owners = carry(track, hashes)[0].owners
        old = hashes_of(before.decode("utf-8", "surrogateescape")) if before is not None else []
        for j in changed_lines(old, hashes):
            trace = owners[j]
            record = next(iter(runs.get(trace or "", [])), None)
            if trace is None or record is None:
                continue
            sid = session_id(TOOL, record.conversation)
            files.setdefault(rel, {}).setdefault(f"{sid}::{trace}", []).append(j + 1)
            entry: dict[str, object] = {"agent_id": {"tool": TOOL, "id": record.conversation, "model": record.model}}
            if human:
                entry["human_author"] = human
            sessions[sid] = entry
    if not files:
        return None
    metadata = {"schema_version": "authorship/3.0.0", "base_commit_sha": commit, "prompts": {}, "sessions": sessions}
    return render_log(files, metadata)


def _carry_to(ledger: Ledger, git: GitRepository, root: Path, head: str, tracked: list[str]) -> None:
    """Tracks moved to what HEAD holds where the work tree agrees with it (a committed rewrite is overridden)."""
    for path in tracked:
        try:
            disk = read_disk_text(Path(path))
        except Exception:  # noqa: BLE001
            continue
        blob = git.blob_at(head, Path(path).relative_to(root).as_posix())
        if blob is not None and blob.decode("utf-8", "surrogateescape") == disk:
            track = ledger.track(path)
            if track is not None:
                moved, lost = carry(track, hashes_of(disk))
                if moved.hashes != track.hashes:
                    for owner, count in lost.items():
                        ledger.add_override(owner, path, count, int(time.time()))
                    ledger.save_track(path, moved)


# -- nagent-lsp blame --------------------------------------------------------------------------------------------------


@attrs.frozen
class BlameLine:
    line: int
    text: str
    attribution: Attribution | None


def blame_file(session: Session, uri: str) -> list[BlameLine]:
    """Every line of the file on disk with its attribution: a nagent turn (the ledger), a tool's session (the
    authorship log of the commit that last changed it), else that commit. One `git blame` for the whole file."""
    from nagent_lsp.operations.buffers import confined_file

    path, rules = confined_file(session, uri)
    text = rules.read_text(path)
    lines = lines_of(text)
    ledger = ledger_of(session.state_root(path).path)
    owners = owners_in(ledger, path, text) or [None] * len(lines)
    runs = ledger.runs()
    located = service_for(session, path)
    origins: dict[int, tuple[str, str, int, str]] = {}
    notes: AiNotes | None = None
    if located is not None:
        service, rel = located
        sync_notes(session, service.root, service.git)
        notes = notes_of(service.git)
        head = read_head(service.root)
        if head is not None:
            try:
                origins = _whole_blame(service.git.blame(rel, head))
            except MissingObjects as exc:  # every committed line would read as uncommitted: say why instead
                raise UserError(str(exc)) from exc
            except GitError as exc:
                log.info("blame of %s failed: %s", rel, exc)
    out = []
    for n, content in enumerate(lines):
        found: Attribution | None = None
        record = next(iter(runs.get(owners[n] or "", [])), None) if n < len(owners) else None
        if record is not None:
            found = from_run(record)
        elif located is not None and notes is not None:
            head_line = head_line_of(located[0].git, located[0].root, located[1], text, n)
            origin = origins.get(head_line) if head_line else None
            if origin is not None and not origin[0].startswith("0000000"):
                commit, origin_path, origin_line, author = origin
                if notes.has(commit):
                    found = foreign_attribution(notes, commit, origin_path, origin_line)
                if found is None:
                    found = Attribution("git", "git", f"commit {commit[:7]} by {author}", commit=commit)
        out.append(BlameLine(n + 1, content, found))
    return out


def _whole_blame(data: bytes) -> dict[int, tuple[str, str, int, str]]:
    """`git blame --porcelain`: final line -> (commit, path in it, line in it, author)."""
    out: dict[int, tuple[str, str, int, str]] = {}
    authors: dict[str, str] = {}
    names: dict[str, str] = {}
    current: list[str] = []
    for raw in data.split(b"\n"):
        if raw.startswith(b"\t"):
            continue
        parts = raw.split(b" ")
        if len(parts) >= 3 and len(parts[0]) in (40, 64) and parts[1].isdigit() and parts[2].isdigit():
            sha = parts[0].decode("ascii")
            current = [sha, parts[1].decode(), parts[2].decode()]
            out[int(current[2])] = (sha, names.get(sha, ""), int(current[1]), authors.get(sha, "?"))
        elif raw.startswith(b"author ") and current:
            authors[current[0]] = raw[7:].decode("utf-8", "replace")
        elif raw.startswith(b"filename ") and current:
            names[current[0]] = raw[9:].decode("utf-8", "surrogateescape")
            sha, orig, final = current
            out[int(final)] = (sha, names[sha], int(orig), authors.get(sha, "?"))
    return out
