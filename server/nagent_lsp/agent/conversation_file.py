"""A conversation file held for one run: re-read at the start; appends appended, rewrites atomic.

An append costs what it appends (DESIGN §11): the new blocks are appended to the file and fsynced, as long as the
file on disk is what this object last wrote (its size tells); otherwise (the text came from an unsaved buffer, the
initial context was replaced, the user changed the file meanwhile) the whole text is written atomically once, and
appends go on from there. Whole rewrites (the initial context, a fold, compaction) are always atomic.

A run that answers its caller only after `synced()` (`nagent.edit`) defers its appends' fsyncs (`defer_syncs`): each
append is written before `append` returns — a crash of the server loses none of it — and made durable in a worker
thread while the run goes on, instead of holding the run (and the edit on its way to the editor) back (issue 29).
"""

from __future__ import annotations

import logging
from pathlib import Path

from nagent_lsp.agent.shared_conversations import SecretGuard
from nagent_lsp.config.settings import DEFAULT_DENY_READ
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.conversations import PendingSyncs, append_conversation
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.tags.transcript import INITIAL_CONTEXT, set_initial_context

log = logging.getLogger("nagent_lsp")

SHARED_CONTEXT_NOTE = (
    "(Rebuilt from this clone's files before every request and sent to the model then; not kept in a conversation "
    "the repository shares, since it holds machine-specific paths and each user's own context.)"
)


class ConversationFile:
    def __init__(
        self, path: Path, text: str, secrets: tuple[str, ...] = (), deny_read: tuple[str, ...] = DEFAULT_DENY_READ
    ):
        self.path = path
        self._text = text
        self.secrets = secrets  # never written: a read or a result that holds one gets it redacted
        # A conversation git shares gets every secret redacted before it is written (issue 28).
        self.guard = SecretGuard(path, secrets, deny_read)
        self._disk_size: int | None = (
            None  # bytes on disk when they are exactly `text` (as last written); None: unknown
        )
        self.appends = 0  # appends written as appends (not as a rewrite), for tests and the benchmark
        self.rewrites = 0
        self._syncs: PendingSyncs | None = None  # set by defer_syncs: appends' fsyncs run in a worker thread

    @property
    def text(self) -> str:
        return self._text

    @text.setter
    def text(self, value: str) -> None:
        self._text = value
        self._disk_size = None  # the disk no longer holds this text: the next save rewrites it whole

    @classmethod
    def open(
        cls,
        path: Path,
        port: EditorPort | None = None,
        secrets: tuple[str, ...] = (),
        deny_read: tuple[str, ...] = DEFAULT_DENY_READ,
    ) -> ConversationFile:
        """The user's latest words win: an open buffer (unsaved edits included) over the file on disk."""
        buffer = port.read_buffer(path) if port is not None else None
        text = buffer.text if buffer is not None else read_disk_text(path)
        convo = cls(path, text, tuple(s for s in secrets if s), deny_read)
        if buffer is None:
            convo._disk_size = len(text.encode("utf-8")) if path.exists() else None
        return convo

    def defer_syncs(self) -> None:
        """From now on appends return once written; their fsyncs run in a worker thread until `synced()`."""
        if self._syncs is None:
            self._syncs = PendingSyncs()

    async def synced(self) -> None:
        """Every append so far is on disk (fsynced). A failed fsync rewrites the whole text atomically (synced
        there), so the conversation never ends a run shorter than what was appended."""
        if self._syncs is None:
            return
        import asyncio  # only a run that deferred its syncs waits here; the CLI's start-up does not import asyncio

        failed = False
        for future in self._syncs.take():
            try:
                await asyncio.wrap_future(future)
            except OSError as exc:
                log.info("fsync of %s failed (%s); rewriting it whole", self.path, exc)
                failed = True
        if failed:
            self.save()

    def set_context(self, context: str, save: bool = True) -> None:
        """`context` is a whole <initial_context> block (as the context builder makes it) or just its body."""
        head, tail = f"<{INITIAL_CONTEXT}>\n", f"\n</{INITIAL_CONTEXT}>"
        if context.startswith(head) and context.endswith(tail):
            context = context[len(head) : -len(tail)]
        updated = set_initial_context(self._text, context)
        if updated != self._text:
            self.text = updated
        if save:
            self.save()

    def append(self, *blocks: str) -> None:
        parts = []
        for block in blocks:
            for secret in self.secrets:
                block = block.replace(secret, "[redacted]")
            parts.append(block)
        if not parts:
            return
        # append_block's discipline (a newline first when the file is not empty), built apart so only the
        # addition is encoded and written, and the text is copied once.
        addition = self.guard.clean(("\n" if self._text else "") + "\n".join(parts))
        self._text += addition
        added = addition.encode("utf-8")
        if self._disk_size is not None:
            try:
                if append_conversation(self.path, added, self._disk_size, self._syncs):
                    self._disk_size += len(added)
                    self.appends += 1
                    return
            except OSError:
                pass  # a partial append: the rewrite below puts the whole text back
        self.save()

    def save(self) -> None:
        """Write the whole text atomically (temp file, fsync, rename)."""
        self._text = self.guard.clean(self._text)
        data = self.disk_text().encode("utf-8")
        atomic_write_bytes(self.path, data)
        self._disk_size = len(data)
        self.rewrites += 1

    def disk_text(self) -> str:
        """The text as it is written. A conversation git shares (issue 28) keeps a note in place of its initial
        context: that block holds this clone's absolute paths and file id and the user's own context, it is rebuilt
        from the files on every run anyway, and every clone rewriting it would make each run a change to merge."""
        if not self.guard.shared or f"<{INITIAL_CONTEXT}>" not in self._text:
            return self._text
        return set_initial_context(self._text, SHARED_CONTEXT_NOTE)
