"""A run's change set (DESIGN §9): the staged text of every file other than the target that the run wrote.

The target's staged text stays on `EditSession.staged` and its split segments on `EditSession.splits`; this holds
the rest — other workspace files (their base: the open buffer, else the disk) and new files (base ""). Nothing
here touches the disk: the operation delivers the whole set in one change at the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.core.ports import EditorPort


@dataclass(frozen=True)
class WriteTarget:
    """Where a write goes (`agent.write_policy.resolve_write`): `target` (the run's file), `segment` (of the
    target's split), `file` (another existing workspace file) or `new` (a file the change set creates)."""

    kind: Literal["target", "segment", "file", "new"]
    path: Path  # resolved


@dataclass
class StagedFile:
    path: Path  # resolved
    uri: str
    base_text: str  # what the run started from: the buffer (unsaved edits count), the disk, or "" for a new file
    base_version: int | None  # the buffer's version when it was read (None: disk or new)
    text: str  # as the model has left it
    created: bool  # the file did not exist when the run first wrote it

    @property
    def changed(self) -> bool:
        return self.created or self.text != self.base_text


@dataclass
class ChangeSet:
    files: dict[Path, StagedFile] = field(default_factory=dict)

    def get(self, path: Path) -> StagedFile | None:
        return self.files.get(path)

    def open(self, path: Path, port: EditorPort, rules: ReadRules, created: bool) -> StagedFile:
        """The staged file for `path`, its base read on first use (`Refused` when it cannot be read as text)."""
        staged = self.files.get(path)
        if staged is not None:
            return staged
        if created:
            staged = StagedFile(path, path.as_uri(), "", None, "", True)
        else:
            buffer = port.read_buffer(path)
            if buffer is not None:
                rules.check_text(path, buffer.text)
                staged = StagedFile(path, buffer.uri, buffer.text, buffer.version, buffer.text, False)
            else:
                text = rules.read_text(path)
                staged = StagedFile(path, path.as_uri(), text, None, text, False)
        self.files[path] = staged
        return staged

    def changed(self) -> list[StagedFile]:
        """Files whose staged text differs from their base (or that are new), in the order first written."""
        return [f for f in self.files.values() if f.changed]


__all__ = ["ChangeSet", "Refused", "StagedFile", "WriteTarget"]
