"""EditorPort for the terminal: buffers are the files on disk, a change is an atomic write, questions go to a TTY."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from nagent_lsp.core.ports import ApplyOutcome, Buffer, FileChange, FileOutcome, Progress, ReviewMark
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.text.edits import minimal_edits
from nagent_lsp.text.merge import plan_change


class DiskPort:
    def __init__(self, folders: list[Path], interactive: bool | None = None, quiet: bool = False):
        self.folders = folders
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.quiet = quiet

    def workspace_folders(self) -> list[Path]:
        return list(self.folders)

    def read_buffer(self, path: Path) -> Buffer | None:
        return None  # no editor buffers: callers read the disk

    async def apply_change(self, change: FileChange) -> ApplyOutcome:
        outcome = await self.apply_changes([change], change.label)
        final = outcome.files[0].final_text if outcome.files else outcome.final_text
        return ApplyOutcome(outcome.applied, outcome.edits, outcome.reason, final, outcome.files, outcome.conflict)

    async def apply_changes(self, changes: Sequence[FileChange], label: str) -> ApplyOutcome:
        """Every file merged three ways against the disk first; a conflict writes nothing; then atomic writes."""
        planned: list[FileOutcome] = []
        for change in changes:
            exists = change.path.exists()
            current = read_disk_text(change.path) if exists else ""
            if change.created and exists:
                if current == change.new_text:
                    continue
                reason = f"conflict: {change.path} was created meanwhile with other content; nothing was applied"
                return ApplyOutcome(False, 0, reason, conflict=change.path)
            plan = plan_change(change.base_text, current, change.new_text)
            if plan.target is None:
                if plan.reason == "no change" and not (change.created and not exists):
                    continue
                if plan.reason != "no change":
                    why = f"{plan.reason} (in {change.path})" if len(changes) > 1 else plan.reason
                    return ApplyOutcome(False, 0, why, current, conflict=change.path)
            target = plan.target if plan.target is not None else change.new_text
            edits = len(minimal_edits(current, target, "utf-32")) or 1
            planned.append(FileOutcome(change.path, change.uri, edits, change.created, current, target))
        if not planned:
            return ApplyOutcome(False, 0, "no change")
        for outcome in planned:
            atomic_write_text(outcome.path, outcome.final_text)
        return ApplyOutcome(True, sum(o.edits for o in planned), None, planned[0].final_text, tuple(planned))

    def publish_review(self, uri: str, marks: Sequence[ReviewMark]) -> None:
        return None  # the CLI shows a proposal as a diff

    async def ask(self, message: str, choices: list[str]) -> str | None:
        if not self.interactive:
            return None
        prompt = f"{message} [{' / '.join(f'{i + 1}={c}' for i, c in enumerate(choices))}] "
        try:
            answer = input(prompt).strip()
        except EOFError:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return choices[int(answer) - 1]
        return next((c for c in choices if c.lower() == answer.lower()), None)

    async def show_document(self, path: Path) -> bool:
        return False

    async def begin_progress(self, title: str, cancellable: bool = True) -> Progress:
        self._say(f"{title}…")
        return Progress(title)

    def report_progress(self, progress: Progress, message: str, percentage: int | None = None) -> None:
        self._say(f"  {message}")

    def end_progress(self, progress: Progress, message: str = "") -> None:
        if message and not progress.ended:
            self._say(f"  {message}")
        progress.ended = True

    def log(self, level: str, message: str) -> None:
        if level in ("warning", "error"):
            print(f"{level}: {message}", file=sys.stderr)

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr)
