"""EditorPort over LSP: buffers from the client's open documents, changes as workspace/applyEdit.

Every request to the client is gated on its capabilities and bounded by a timeout, because some clients
(eglot, lsp-mode) answer requests they do not support with null, which would otherwise hang forever.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from nagent_lsp.core.ports import (
    ApplyOutcome,
    Buffer,
    FileChange,
    FileOutcome,
    Progress,
    Records,
    ReviewMark,
    apply_as_change_set,
)
from nagent_lsp.lsp import capabilities as caps
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.store.root import ensure_root
from nagent_lsp.text.edits import TextEditSpec, minimal_edits

if TYPE_CHECKING:  # the planner, merge3 and the transaction log load at the first edit, not at start-up (issue 29)
    from nagent_lsp.text.merge import Current

log = logging.getLogger("nagent_lsp")

STREAM_NOTIFICATION = "nagent/stream"  # the answer as it forms (contract A, issue 23)
SHOW_TIMEOUT = 5.0
ASK_TIMEOUT = 120.0
APPLY_TIMEOUT = 300.0  # the user may be looking at a refactor preview
SETTLE_DELAY = 0.3  # time for lagging didChange notifications to arrive before a retry
# A refusal that names a version is a stale-version rejection (eglot: "Edits on `f' require version 3, you have 4"),
# which a retry against the latest text may fix; any other refusal (a user's "no") is final and never re-sent.
_STALE = re.compile(r"version", re.IGNORECASE)


@dataclass
class _Planned:
    change: FileChange
    uri: str
    version: int | None
    current: str
    target: str
    specs: list[TextEditSpec]


class LspPort:
    def __init__(self, server: NagentServer):
        self.server = server

    # -- reading -------------------------------------------------------------------------------------
    def workspace_folders(self) -> list[Path]:
        return list(self.server.session.workspace_folders)

    def _document(self, path: Path) -> TextDocument | None:
        """The open document for `path`, matched after resolving symlinks on both sides: the editor may have
        opened the file through a linked folder while workflows work with resolved paths."""
        docs = self.server.workspace.text_documents
        doc = docs.get(path.as_uri())
        if doc is not None:
            return doc
        wanted = os.path.realpath(path)
        for uri, candidate in list(docs.items()):
            fs = to_fs_path(uri)
            if fs and os.path.realpath(fs) == wanted:
                return candidate
        return None

    def read_buffer(self, path: Path) -> Buffer | None:
        doc = self._document(path)
        if doc is None:
            return None
        return Buffer(path=path, text=doc.source, version=doc.version, uri=doc.uri)

    def encoding(self) -> str:
        value = self.server.workspace.position_encoding
        value = getattr(value, "value", value) or "utf-16"
        return str(value)

    # -- changing ------------------------------------------------------------------------------------
    async def apply_change(self, change: FileChange) -> ApplyOutcome:
        return await apply_as_change_set(self, change)

    async def apply_changes(
        self, changes: Sequence[FileChange], label: str, records: Records | None = None
    ) -> ApplyOutcome:
        """One `workspace/applyEdit` for the whole change set (DESIGN §9). A refusal that says the version was stale
        is retried once against the latest text; any other refusal (the user said no) is the answer. New files the
        editor cannot create and `records` are written (one transaction) once the editor applied the edit."""
        if not caps.supports_apply_edit(self.server.client_capabilities):
            return ApplyOutcome(False, 0, "the editor does not support workspace/applyEdit")
        outcome, sent = await self._send_all(changes, label, 1, records)
        if outcome.applied or sent is None or not self._stale(outcome.reason or "", sent):
            return outcome
        # A client whose didChange lags (eglot's idle timer) rejects a versioned edit: let it catch up, retry once.
        await asyncio.sleep(SETTLE_DELAY)
        return (await self._send_all(changes, label, 2, records))[0]

    def _stale(self, reason: str, sent: list[_Planned]) -> bool:
        if _STALE.search(reason):
            return True
        for plan in sent:  # the buffer moved on since the edit was computed
            buffer = self.read_buffer(plan.change.path)
            if plan.version is not None and buffer is not None and buffer.version != plan.version:
                return True
        return False

    def _current(self, change: FileChange) -> Current:
        """A file's text as the editor has it: its open buffer, else the disk (None: no such file)."""
        from nagent_lsp.text.merge import Current

        buffer = self.read_buffer(change.path)
        if buffer is not None:
            return Current(buffer.text, buffer.version, buffer.uri)
        if not change.path.exists():
            return Current(None, None, change.uri)
        return Current(read_disk_text(change.path), None, change.uri)

    def _plan(self, changes: Sequence[FileChange]) -> tuple[list[_Planned], ApplyOutcome | None]:
        """The change set planned by the one planner every port shares (`text.merge.plan_change_set`), each
        file's edits in the editor's position encoding."""
        from nagent_lsp.text.merge import plan_change_set

        plan = plan_change_set(changes, self._current)
        if plan.conflict is not None:
            return [], ApplyOutcome(False, 0, plan.reason, plan.conflict_text, conflict=plan.conflict)
        encoding = self.encoding()
        return [
            _Planned(
                p.change,
                p.uri,
                p.version,
                p.current,
                p.target,
                [] if p.change.created else _edits(p.current, p.target, encoding),
            )
            for p in plan.files
        ], None

    async def _send_all(
        self, changes: Sequence[FileChange], label: str, attempt: int, records: Records | None
    ) -> tuple[ApplyOutcome, list[_Planned] | None]:
        """One applyEdit; returns the outcome and what was sent (None when nothing was sent)."""
        planned, failed = self._plan(changes)
        if failed is not None:
            return failed, None
        if not planned:
            return ApplyOutcome(False, 0, "no change"), None
        client_caps = self.server.client_capabilities
        documents = caps.supports_document_changes(client_caps)
        create_in_editor = documents and caps.supports_create(client_caps)
        workspace_edit = types.WorkspaceEdit()
        document_changes: list[types.TextDocumentEdit | types.CreateFile] = []
        plain: dict[str, list[types.TextEdit]] = {}
        on_disk: list[_Planned] = []  # new files the editor cannot create: written by us once the edit is applied
        for plan in planned:
            edits = [_text_edit(spec) for spec in plan.specs]
            if plan.change.created:
                if not create_in_editor:
                    on_disk.append(plan)
                    continue
                document_changes.append(
                    types.CreateFile(
                        uri=plan.uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True)
                    )
                )
                whole = types.Range(types.Position(0, 0), types.Position(0, 0))
                edits = [types.TextEdit(range=whole, new_text=plan.target)] if plan.target else []
                plan.specs = [TextEditSpec(0, 0, 0, 0, plan.target)] if plan.target else []
                if not edits:
                    continue
                identifier = types.OptionalVersionedTextDocumentIdentifier(uri=plan.uri, version=None)
                document_changes.append(types.TextDocumentEdit(text_document=identifier, edits=list(edits)))
            elif documents:
                identifier = types.OptionalVersionedTextDocumentIdentifier(uri=plan.uri, version=plan.version)
                document_changes.append(types.TextDocumentEdit(text_document=identifier, edits=list(edits)))
            else:
                plain[plan.uri] = edits
        total = sum(len(p.specs) if p not in on_disk else 1 for p in planned)
        if document_changes:
            workspace_edit.document_changes = document_changes
        else:
            workspace_edit.changes = plain
        if document_changes or plain:
            params = types.ApplyWorkspaceEditParams(edit=workspace_edit, label=label)
            try:
                result = await asyncio.wait_for(self.server.workspace_apply_edit_async(params), APPLY_TIMEOUT)
            except TimeoutError:
                return ApplyOutcome(False, total, "the editor did not answer workspace/applyEdit in time"), None
            except Exception as exc:  # an error reply (eglot rejects stale versions, and a user's "no", this way)
                log.info("applyEdit attempt %d failed: %s", attempt, exc)
                return ApplyOutcome(False, total, f"rejected by the editor: {exc}"), planned
            if not result.applied:
                return ApplyOutcome(False, total, result.failure_reason or "the editor rejected the edit"), planned
        files = tuple(
            FileOutcome(
                p.change.path,
                p.uri,
                1 if p in on_disk else len(p.specs),
                p.change.created,
                p.current,
                p.target,
            )
            for p in planned
        )
        from nagent_lsp.store.transaction import Write, commit

        writes = [Write(p.change.path, p.target.encode("utf-8")) for p in on_disk]
        if records is not None:
            writes += [Write(r.path, None if r.text is None else r.text.encode("utf-8")) for r in records.make(files)]
            await asyncio.to_thread(commit, ensure_root(records.state_root), writes)
        elif writes:
            root = self.server.session.state_root(writes[0].path).path
            await asyncio.to_thread(commit, ensure_root(root), writes)
        return ApplyOutcome(True, total, None, files[0].final_text, files), None

    # -- asking and showing ----------------------------------------------------------------------------
    async def ask(self, message: str, choices: list[str]) -> str | None:
        if not caps.can_ask(self.server.client_capabilities):
            return None
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Info, message=message, actions=[types.MessageActionItem(title=c) for c in choices]
        )
        try:
            result = await asyncio.wait_for(self.server.window_show_message_request_async(params), ASK_TIMEOUT)
        except Exception as exc:
            log.info("showMessageRequest failed: %s", exc)
            return None
        title = getattr(result, "title", None)
        return title if title in choices else None

    def ask_blocking(self, message: str, choices: list[str]) -> str | None:
        """`ask` from a worker thread (the consent question of background commit summaries, issue 25): the question
        goes out on the event loop, the thread waits for the answer (None: no answer, no loop, or on the loop)."""
        loop = self.server.loop
        if loop is None or loop.is_closed():
            return None
        try:
            if asyncio.get_running_loop() is loop:
                return None  # waiting here would block the very loop that carries the answer
        except RuntimeError:
            pass  # a worker thread: no running loop, as expected
        future = asyncio.run_coroutine_threadsafe(self.ask(message, choices), loop)
        try:
            return future.result(ASK_TIMEOUT + SHOW_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - no answer is an answer: nothing is sent
            log.info("consent question failed: %s", exc)
            return None

    async def show_document(self, path: Path) -> bool:
        if not caps.can_show_document(self.server.client_capabilities):
            return False
        params = types.ShowDocumentParams(uri=path.as_uri(), take_focus=True)
        try:
            result = await asyncio.wait_for(self.server.window_show_document_async(params), SHOW_TIMEOUT)
        except Exception as exc:
            log.info("showDocument failed: %s", exc)
            return False
        return bool(getattr(result, "success", False))

    # -- progress ----------------------------------------------------------------------------------------
    async def begin_progress(self, title: str, cancellable: bool = True) -> Progress:
        progress = Progress(title)
        if not caps.can_show_progress(self.server.client_capabilities):
            return progress
        token = str(uuid.uuid4())
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(token), SHOW_TIMEOUT)
            self.server.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=title, cancellable=cancellable, percentage=0)
            )
        except Exception as exc:
            log.info("progress unavailable: %s", exc)
            return progress
        progress.token = token
        future = self.server.work_done_progress.tokens.get(token)
        if future is not None:
            # pygls cancels this future when the client sends window/workDoneProgress/cancel.
            future.add_done_callback(lambda f: progress.cancel.set() if f.cancelled() else None)
        return progress

    def report_progress(self, progress: Progress, message: str, percentage: int | None = None) -> None:
        token = progress.token
        if token:
            self.server.work_done_progress.report(
                token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    def end_progress(self, progress: Progress, message: str = "") -> None:
        token = progress.token
        if token:
            self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            progress.token = None

    def answer_delta(self, progress: Progress | None, uri: str, delta: str, turn: int, done: bool = False) -> None:
        """`nagent/stream {token, uri, delta, turn, done?}` to a client that declared `experimental.nagent.stream`;
        nothing to others (their `$/progress` shows the live figures and step)."""
        if not caps.wants_stream(self.server.client_capabilities):
            return
        params: dict[str, object] = {
            "token": progress.token if progress is not None else None,
            "uri": uri,
            "delta": delta,
            "turn": turn,
        }
        if done:
            params["done"] = True
        self.server.protocol.notify(STREAM_NOTIFICATION, params)

    def log(self, level: str, message: str) -> None:
        getattr(log, level, log.info)(message)

    # -- the zero-plugin review ---------------------------------------------------------------------------
    def publish_review(self, uri: str, marks: Sequence[ReviewMark]) -> None:
        """Pending hunks as Hint diagnostics (source "nagent", code = hunk id, data = {proposal, hunk})."""
        last = self._last_line(uri)
        diagnostics = [
            types.Diagnostic(
                range=_mark_range(m.start_line, m.end_line, last),
                message=m.message,
                severity=types.DiagnosticSeverity.Hint,
                source="nagent",
                code=m.hunk,
                data={"proposal": m.proposal, "hunk": m.hunk},
            )
            for m in marks
        ]
        history = getattr(self.server, "history_marks", None)  # issue 26 (lsp/features/coupling.py): same list
        diagnostics += history.diagnostics(uri) if history is not None else []
        self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
        if diagnostics:
            self.server.review_shown.add(uri)
        else:
            self.server.review_shown.discard(uri)

    def _last_line(self, uri: str) -> int | None:
        """The open document's last line that holds text (past a final newline there is no line to put a cursor
        on in Neovim or eglot), None when it is not open."""
        document = self.server.workspace.text_documents.get(uri)
        return None if document is None else max(len(document.lines) - 1, 0)

    def shows_review(self, uri: str) -> bool:
        """Whether `uri` was last sent pending hunks (so an empty list clears them)."""
        return uri in self.server.review_shown


def _mark_range(start: int, end: int, last: int | None) -> types.Range:
    """A pending hunk's whole lines; one added past the final newline is shown on the last line (issue 25, item 8),
    where the code actions for it are offered too (operations.code_actions.review_offers)."""
    if last is not None and start > last:
        return types.Range(types.Position(last, 0), types.Position(last, 0))
    return types.Range(types.Position(start, 0), types.Position(max(end, start), 0))


def _edits(current: str, target: str, encoding: str) -> list[TextEditSpec]:
    """Minimal edits; an insertion at the end of a file said inside its lines, since Neovim appends an edit that
    starts past the last line as new lines, its trailing newline an extra blank line (issue 25, item 5)."""
    from nagent_lsp.text.document_end import within_lines

    return within_lines(current, minimal_edits(current, target, encoding), encoding)


def _text_edit(spec: TextEditSpec) -> types.TextEdit:
    rng = types.Range(types.Position(spec.start_line, spec.start_char), types.Position(spec.end_line, spec.end_char))
    return types.TextEdit(range=rng, new_text=spec.new_text)
