"""The ports: `EditorPort`, through which operations talk to an editor (LSP) or to the disk (CLI), and `ChatModel`,
through which they talk to a model.

Operations never import pygls/lsprotocol or openai; the LSP layer and the CLI each implement `EditorPort`,
`llm.openai_chat` implements `ChatModel`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from nagent_lsp.core.model import Message, Reply

if TYPE_CHECKING:
    import asyncio


def _new_event() -> asyncio.Event:
    import asyncio  # the CLI's synchronous commands (status, history) never pay for importing asyncio

    return asyncio.Event()


@dataclass(frozen=True)
class Buffer:
    """A file's current text as the user sees it (unsaved edits count)."""

    path: Path
    text: str
    version: int | None  # None when read from disk
    uri: str


@dataclass(frozen=True)
class FileChange:
    """A whole-text change to one file; the port turns it into minimal edits for its editor."""

    path: Path
    uri: str
    base_text: str  # the text the change was computed against
    new_text: str
    base_version: int | None
    label: str = "nagent"
    created: bool = False  # a new file: base_text is "" and the file must not exist when the change is applied


@dataclass(frozen=True)
class FileOutcome:
    """What one file of an applied change set became."""

    path: Path
    uri: str
    edits: int
    created: bool
    base_text: str
    final_text: str  # the text after applying (three-way merge may differ from the change's new_text)


@dataclass(frozen=True)
class ApplyOutcome:
    applied: bool
    edits: int = 0
    reason: str | None = None
    final_text: str | None = None  # the text after applying (three-way merge may differ from new_text)
    files: tuple[FileOutcome, ...] = ()  # apply_changes: every file changed, in the order given
    conflict: Path | None = None  # the file whose merge failed (nothing applied)


@dataclass(frozen=True)
class RecordWrite:
    """A file of nagent's own state that must agree with a change set (its patch, a proposal's record); `text`
    None deletes the file."""

    path: Path
    text: str | None


@dataclass(frozen=True)
class Records:
    """What `apply_changes` writes with the change set once it knows what each file became (`make`, given the
    applied files). The disk port writes them in the same transaction as the files (all or nothing, journalled in
    `state_root`); the editor port once the editor applied the edit."""

    state_root: Path
    make: Callable[[Sequence[FileOutcome]], Sequence[RecordWrite]]


@dataclass(frozen=True)
class ReviewMark:
    """One pending hunk of a proposal, as a document shows it (the zero-plugin review: a Hint diagnostic)."""

    proposal: str
    hunk: str
    start_line: int  # 0-based, in the document's current text
    end_line: int  # exclusive; == start_line for a pure insertion
    message: str


@dataclass
class Progress:
    """A progress handle; `cancel` is set when the user cancels it from the editor."""

    title: str
    cancel: asyncio.Event = field(default_factory=_new_event)
    token: str | None = None  # the editor's progress token, when it shows progress
    ended: bool = False

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()


class EditorPort(Protocol):
    def workspace_folders(self) -> list[Path]: ...

    def read_buffer(self, path: Path) -> Buffer | None:
        """The open buffer for `path`, else None (the caller reads the disk)."""

    async def apply_change(self, change: FileChange) -> ApplyOutcome: ...

    async def apply_changes(
        self, changes: Sequence[FileChange], label: str, records: Records | None = None
    ) -> ApplyOutcome:
        """The whole change set at once (DESIGN §9), planned by `text.merge.plan_change_set`: each file merged three
        ways against its current text; a conflict in any file applies nothing (`conflict` names it); else one
        delivery of every file, with `records` (see `Records`)."""

    def publish_review(self, uri: str, marks: Sequence[ReviewMark]) -> None:
        """Show the pending hunks of a document (none: clear them)."""

    async def ask(self, message: str, choices: list[str]) -> str | None:
        """The chosen title, or None when the editor cannot ask, the user dismissed it, or it timed out."""

    async def show_document(self, path: Path) -> bool: ...

    async def begin_progress(self, title: str, cancellable: bool = True) -> Progress: ...

    def report_progress(self, progress: Progress, message: str, percentage: int | None = None) -> None: ...

    def end_progress(self, progress: Progress, message: str = "") -> None:
        """Idempotent: only the first call reaches the editor."""

    def answer_delta(self, progress: Progress | None, uri: str, delta: str, turn: int, done: bool = False) -> None:
        """The next piece of the answer the model is writing for `uri` (the text of its `<nagent-response>`, never
        action tags) in conversation turn `turn`; `done` (with `delta` "") once that reply has ended. A reply after a
        `done` starts afresh (a retry or a correction of the same turn, or the next turn). LSP: a `nagent/stream`
        notification to a client that opted in; CLI: printed when stdout is a terminal; ACP: agent_message_chunk."""

    def log(self, level: str, message: str) -> None: ...


async def apply_as_change_set(port: EditorPort, change: FileChange) -> ApplyOutcome:
    """`apply_change` in terms of `apply_changes`, for every port: one file is a change set of one (the same merge,
    transaction and records), reported with that file's final text."""
    outcome = await port.apply_changes([change], change.label)
    final = outcome.files[0].final_text if outcome.files else outcome.final_text
    return ApplyOutcome(outcome.applied, outcome.edits, outcome.reason, final, outcome.files, outcome.conflict)


class ChatModel(Protocol):
    """A configured chat model (the openai SDK behind it, any OpenAI-compatible endpoint)."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        cancel: asyncio.Event | None = None,
        stop: list[str] | None = None,
        on_delta: Callable[[str], None] | None = None,
    ) -> Reply:
        """`on_delta` gets each piece of the reply's raw text as it streams in. Raises ModelNotConfigured,
        ModelCancelled (cancel set, or the task cancelled) or ModelError."""

    def complete_sync(
        self,
        messages: Sequence[Message],
        *,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        on_delta: Callable[[str], None] | None = None,
    ) -> Reply:
        """The blocking form, for worker threads."""

    def prepare(self) -> None:
        """Start getting ready for the first `complete` (on the event loop; returns at once)."""

    async def aclose(self) -> None: ...
