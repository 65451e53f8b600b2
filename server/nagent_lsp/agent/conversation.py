"""A conversation file held for one run: re-read at the start, every append written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nagent_lsp.core.ports import EditorPort
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.tags.transcript import INITIAL_CONTEXT, append_block, set_initial_context


@dataclass
class ConversationFile:
    path: Path
    text: str
    secrets: tuple[str, ...] = ()  # never written: a read or a result that holds one gets it redacted

    @classmethod
    def open(cls, path: Path, port: EditorPort | None = None, secrets: tuple[str, ...] = ()) -> ConversationFile:
        """The user's latest words win: an open buffer (unsaved edits included) over the file on disk."""
        buffer = port.read_buffer(path) if port is not None else None
        text = buffer.text if buffer is not None else read_disk_text(path)
        return cls(path, text, tuple(s for s in secrets if s))

    def set_context(self, context: str, save: bool = True) -> None:
        """`context` is a whole <initial_context> block (as the context builder makes it) or just its body."""
        head, tail = f"<{INITIAL_CONTEXT}>\n", f"\n</{INITIAL_CONTEXT}>"
        if context.startswith(head) and context.endswith(tail):
            context = context[len(head) : -len(tail)]
        self.text = set_initial_context(self.text, context)
        if save:
            self.save()

    def append(self, *blocks: str) -> None:
        for block in blocks:
            for secret in self.secrets:
                block = block.replace(secret, "[redacted]")
            self.text = append_block(self.text, block)
        self.save()

    def save(self) -> None:
        atomic_write_text(self.path, self.text)
