"""EditorPort over LSP: buffers from the client's open documents, changes as workspace/applyEdit.

Every request to the client is gated on its capabilities and bounded by a timeout, because some clients
(eglot, lsp-mode) answer requests they do not support with null, which would otherwise hang forever.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from nagent_lsp.core.ports import ApplyOutcome, Buffer, FileChange, Progress
from nagent_lsp.lsp import capabilities as caps
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.text.edits import TextEditSpec, minimal_edits
from nagent_lsp.text.merge import plan_change

log = logging.getLogger("nagent_lsp")

SHOW_TIMEOUT = 5.0
ASK_TIMEOUT = 120.0
APPLY_TIMEOUT = 300.0  # the user may be looking at a refactor preview
SETTLE_DELAY = 0.3  # time for lagging didChange notifications to arrive before a retry
CONFIRM_ANNOTATION = "nagent.confirm"


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
        client_caps = self.server.client_capabilities
        if not caps.supports_apply_edit(client_caps):
            return ApplyOutcome(False, 0, "the editor does not support workspace/applyEdit")
        if change.needs_confirmation and not caps.supports_change_annotations(client_caps):
            if caps.can_ask(client_caps):
                choice = await self.ask(f"nagent wants to change {change.path.name}. Apply?", ["Apply", "Discard"])
                if choice != "Apply":
                    return ApplyOutcome(False, 0, "preview declined")
        outcome, retryable = await self._send(change, attempt=1)
        if outcome.applied or not retryable:
            return outcome
        # A client whose didChange lags (eglot's idle timer) rejects a versioned edit: let it catch up, retry once.
        await asyncio.sleep(SETTLE_DELAY)
        return (await self._send(change, attempt=2))[0]

    async def _send(self, change: FileChange, attempt: int) -> tuple[ApplyOutcome, bool]:
        """One applyEdit; the flag says whether a retry could help (a plain versioned edit the client refused)."""
        buffer = self.read_buffer(change.path)
        if buffer is not None:
            current, version, uri = buffer.text, buffer.version, buffer.uri
        else:
            current = read_disk_text(change.path)
            version, uri = None, change.uri
        plan = plan_change(change.base_text, current, change.new_text)
        if plan.target is None:
            return ApplyOutcome(False, 0, plan.reason, current), False
        specs = minimal_edits(current, plan.target, self.encoding())
        annotation = CONFIRM_ANNOTATION if change.needs_confirmation else None
        edits: list[types.TextEdit | types.AnnotatedTextEdit] = [_text_edit(s, annotation) for s in specs]
        client_caps = self.server.client_capabilities
        workspace_edit = types.WorkspaceEdit()
        if annotation and caps.supports_change_annotations(client_caps):
            workspace_edit.change_annotations = {
                annotation: types.ChangeAnnotation(
                    label=change.label, needs_confirmation=True, description="nagent edit"
                )
            }
        if caps.supports_document_changes(client_caps):
            identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
            workspace_edit.document_changes = [types.TextDocumentEdit(text_document=identifier, edits=edits)]
        else:
            workspace_edit.changes = {uri: [_plain(e) for e in edits]}
        params = types.ApplyWorkspaceEditParams(edit=workspace_edit, label=change.label)
        # Only a plain edit may be sent twice: a refused preview is the user's answer, a timeout would double the wait.
        retryable = annotation is None
        try:
            result = await asyncio.wait_for(self.server.workspace_apply_edit_async(params), APPLY_TIMEOUT)
        except TimeoutError:
            return ApplyOutcome(False, len(specs), "the editor did not answer workspace/applyEdit in time"), False
        except Exception as exc:  # an error reply (eglot rejects stale versions this way)
            log.info("applyEdit attempt %d failed: %s", attempt, exc)
            return ApplyOutcome(False, len(specs), f"rejected by the editor: {exc}"), retryable
        if not result.applied:
            reason = result.failure_reason or "the editor rejected the edit"
            if annotation:
                reason = f"preview declined or rejected: {reason}"
            return ApplyOutcome(False, len(specs), reason), retryable
        return ApplyOutcome(True, len(specs), None, plan.target), False

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

    def log(self, level: str, message: str) -> None:
        getattr(log, level, log.info)(message)


def _text_edit(spec: TextEditSpec, annotation: str | None) -> types.TextEdit | types.AnnotatedTextEdit:
    rng = types.Range(types.Position(spec.start_line, spec.start_char), types.Position(spec.end_line, spec.end_char))
    if annotation:
        return types.AnnotatedTextEdit(range=rng, new_text=spec.new_text, annotation_id=annotation)
    return types.TextEdit(range=rng, new_text=spec.new_text)


def _plain(edit: types.TextEdit | types.AnnotatedTextEdit) -> types.TextEdit:
    return types.TextEdit(range=edit.range, new_text=edit.new_text)
