"""Everything one edit run needs, in one place: the target and its staged text, the editor port, the model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nagent_lsp.agent.changeset import ChangeSet, WriteTarget
from nagent_lsp.agent.mcp_tools import McpTools
from nagent_lsp.agent.permissions import Policy, ShellPermission
from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.agent.splits import StagedSplits
from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import SplitError
from nagent_lsp.core.model import Message, Reply
from nagent_lsp.core.ports import EditorPort, Progress
from nagent_lsp.llm.tokens import Tokens
from nagent_lsp.store.split_index import read_segment
from nagent_lsp.tags.stream import AnswerStream

LIVE_REPORT_EVERY = 0.25  # seconds: live token counts go to the progress at most this often (a step change at once)

MAX_DEPTH = 2  # sub-conversations may nest this deep; deeper requests get an error result

Complete = Callable[..., Awaitable[Reply]]  # complete(messages: list[Message], *, cancel) -> Reply
# May the model write this (resolved) path? (allowed, reason when not). The agents' `write` permission (allow/ask/
# deny per path glob) plugs in here; it may be async (an `ask` goes to the user). Scope rules are checked first.
WritePermission = Callable[[Path], "tuple[bool, str] | Awaitable[tuple[bool, str]]"]


def allow_every_write(path: Path) -> tuple[bool, str]:
    return True, ""


@dataclass
class EditSession:
    port: EditorPort
    settings: Settings
    state_root: Path  # already created
    folders: list[Path]
    target: Path
    file_id: str
    staged: str  # the target's text as the model has left it (never on disk until applied)
    complete: Complete
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    permission: ShellPermission = field(default_factory=ShellPermission)
    progress: Progress | None = None
    depth: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    conversations_dir: Path | None = None
    child_context: Callable[[str, str], str] | None = None  # (child name, invocation) -> initial context body
    secrets: tuple[str, ...] = ()  # values (the API key) that must never reach a result, a file or the model
    base_text: str | None = None  # the target's text when the run started (None: the staged text at start)
    # Segment writes and re-splits, seen by this run alone until its change is applied (shared with children).
    splits: StagedSplits = field(default_factory=StagedSplits)
    # Every other file the run wrote or created (DESIGN §9), shared with children; delivered with the target.
    changes: ChangeSet = field(default_factory=ChangeSet)
    write_permission: WritePermission = allow_every_write
    policy: Policy = field(default_factory=Policy)  # the agent's permissions (read narrows ReadRules here)
    uri: str = ""  # the target as the editor names it (default: its file URI); answer deltas carry it
    mcp: McpTools | None = None  # issue 24: the run's MCP servers and `tools` permission (<nagent-tool>)
    # issue 24: the workspace's main conversation. There is no target file: `target` is the workspace folder (a
    # directory, never read or staged as text) and every write goes through the workspace write policy.
    main: bool = False

    def __post_init__(self) -> None:
        if self.base_text is None:
            self.base_text = self.staged
        if not self.uri:
            self.uri = self.target.as_uri()

    @property
    def cwd(self) -> Path:
        return self.folders[0] if self.folders else self.target.parent

    def splits_root(self) -> Path:
        return self.state_root / "splits"

    def read_rules(self) -> ReadRules:
        """The one read confinement (agent.sandbox), with this session's folders, denyRead and maxFileBytes."""
        return ReadRules.of(
            self.folders, self.settings.denyRead, self.settings.maxFileBytes, self.policy.read_check(self.folders)
        )

    def edited(self) -> bool:
        """Whether the run has changed the target's text (then a split of it describes unapplied text)."""
        return self.staged != self.base_text

    def text_of(self, where: WriteTarget) -> str:
        """The text a write target holds as this run sees it (its staged edits included); `Refused` when an
        existing file cannot be read as text. With `stage`, the one write path `<nagent-write>` and
        `<nagent-replace>` share (targets come from `agent.write_policy.resolve_write`)."""
        if where.kind == "target":
            return self.staged
        if where.kind == "segment":
            text = self.splits.text(where.path)
            if text is None:
                try:
                    text = read_segment(where.path, self.settings.maxFileBytes).decode("utf-8")
                except (SplitError, OSError, UnicodeDecodeError) as exc:
                    raise Refused(f"{where.path} cannot be read ({exc})", "io") from None
            return text
        return self.changes.open(where.path, self.port, self.read_rules(), created=where.kind == "new").text

    def stage(self, where: WriteTarget, text: str) -> None:
        """Stage `text` as the new content of a write target; nothing reaches the disk during the run."""
        if where.kind == "target":
            self.staged = text
        elif where.kind == "segment":
            self.splits.write(where.path, text)  # seen by this run alone; merged by <nagent-file-patch>
        else:
            self.changes.open(where.path, self.port, self.read_rules(), created=where.kind == "new").text = text

    def outputs_dir(self) -> Path:
        return self.state_root / "outputs"

    def shown_path(self, path: str) -> str:
        """A path as the progress shows it: relative to the workspace folder it is in, else as written."""
        for folder in self.folders:
            try:
                return Path(path).relative_to(folder).as_posix() if Path(path).is_absolute() else path
            except ValueError:
                continue
        return path

    def report(self, message: str) -> None:
        if self.progress is not None:
            self.port.report_progress(self.progress, message)

    async def ask_model(self, messages: list[Message], turn: int = 0) -> Reply:
        """One model call. The top-level run streams: the answer's text goes to the editor as it forms
        (`EditorPort.answer_delta`, then one `done`, whatever the call's outcome) and the progress shows the live
        token count and step; a sub-conversation's replies are not the user's answer and do not stream."""
        if self.depth > 0:
            return await self.complete(messages, cancel=self.cancel)
        live = LiveAnswer(self, turn)
        try:
            return await self.complete(messages, cancel=self.cancel, on_delta=live.feed)
        finally:
            live.finish()

    def child(self, **changes: Any) -> EditSession:
        """A sub-conversation: same target, staged text, splits, permissions and cancel; its own tokens."""
        values = {**self.__dict__, "depth": self.depth + 1, "tokens": Tokens(), **changes}
        return EditSession(**values)


class LiveAnswer:
    """One streaming reply of a run, as the user watches it: answer deltas to the port, live figures and the step
    to the progress ("turn 2 · 1,234 tokens · writing calc.py"; the reply's tokens estimated as they come)."""

    def __init__(self, session: EditSession, turn: int):
        self.session = session
        self.turn = turn
        self.answer = AnswerStream(session.shown_path)
        self.sent = False
        self._reported_at = 0.0
        self._reported_step: str | None = None

    def feed(self, piece: str) -> None:
        delta = self.answer.feed(piece)
        session = self.session
        if delta:
            self.sent = True
            session.port.answer_delta(session.progress, session.uri, delta, self.turn)
        now = time.monotonic()
        if self.answer.step != self._reported_step or now - self._reported_at >= LIVE_REPORT_EVERY:
            self._reported_at, self._reported_step = now, self.answer.step
            tokens = (self.answer.chars + 3) // 4  # estimate_tokens' ceil(chars / 4), without keeping the reply's text
            session.report(live_status(session, self.turn, tokens, self.answer.step))

    def finish(self) -> None:
        """The reply ended (or failed): one `done`, so the editor knows the next delta starts a new reply."""
        self.session.port.answer_delta(self.session.progress, self.session.uri, "", self.turn, done=True)


def live_status(session: EditSession, turn: int, streaming: int = 0, step: str | None = None) -> str:
    """The progress line: the turn, the run's tokens so far (plus `streaming`, the reply's estimate) and the step."""
    total = session.tokens.input + session.tokens.output + streaming
    return f"turn {turn} · {total:,} tokens" + (f" · {step}" if step else "")
