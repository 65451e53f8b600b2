"""EditorPort for the terminal: buffers are the files on disk, a change is an atomic write, questions go to a TTY."""

from __future__ import annotations

import sys
from pathlib import Path

from nagent_lsp.core.ports import ApplyOutcome, Buffer, FileChange, Progress
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
        current = read_disk_text(change.path)
        plan = plan_change(change.base_text, current, change.new_text)
        if plan.target is None:
            return ApplyOutcome(False, 0, plan.reason, current)
        if (
            change.needs_confirmation
            and await self.ask(f"Apply the change to {change.path}?", ["Apply", "Discard"]) != "Apply"
        ):
            return ApplyOutcome(False, 0, "preview declined")
        atomic_write_text(change.path, plan.target)
        return ApplyOutcome(True, len(minimal_edits(current, plan.target, "utf-32")), None, plan.target)

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
