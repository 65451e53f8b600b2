"""EditorPort for the terminal: buffers are the files on disk, a change set is one transaction (`store.transaction`),
questions go to a TTY."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from nagent_lsp.core.ports import ApplyOutcome, Buffer, FileChange, Progress, Records, ReviewMark, apply_as_change_set
from nagent_lsp.operations.disk_apply import apply_on_disk

# Set to 1 to print the answer as it streams even when stdout is no terminal (tests, benchmarks), 0 never to.
STREAM_ENV = "NAGENT_STREAM"


def streams_answers(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the CLI prints answer deltas: stdout is a terminal, unless NAGENT_STREAM says otherwise."""
    forced = (os.environ if environ is None else environ).get(STREAM_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stdout.isatty()


class DiskPort:
    writes_disk = True  # apply_change writes the files itself (operations.patch streams a large patch to the disk)

    def __init__(
        self, folders: list[Path], interactive: bool | None = None, quiet: bool = False, stream: bool | None = None
    ):
        self.folders = folders
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.quiet = quiet
        # The answer as it forms, on stdout (issue 23); the final result is printed whole as before, so a pipe or a
        # script reading stdout sees exactly what it did before streaming.
        self.stream = streams_answers() if stream is None else stream
        self._streamed_turn: int | None = None
        self._line_open = False
        self.streamed = False  # some answer text was printed as it came
        self._last_report = ""

    def workspace_folders(self) -> list[Path]:
        return list(self.folders)

    def read_buffer(self, path: Path) -> Buffer | None:
        return None  # no editor buffers: callers read the disk

    async def apply_change(self, change: FileChange) -> ApplyOutcome:
        return await apply_as_change_set(self, change)

    async def apply_changes(
        self, changes: Sequence[FileChange], label: str, records: Records | None = None
    ) -> ApplyOutcome:
        """The change set written as one transaction (`operations.disk_apply`): all of the files or none."""
        return await apply_on_disk(self.folders, changes, records)

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
        # The live token count changes many times a second while a reply streams: a terminal line per step is
        # enough (a report that differs from the last one only in its figures is not printed).
        shape = re.sub(r"[\d,]+ tokens", "# tokens", message)
        if shape != self._last_report:
            self._last_report = shape
            self._say(f"  {message}")

    def end_progress(self, progress: Progress, message: str = "") -> None:
        if message and not progress.ended:
            self._say(f"  {message}")
        progress.ended = True

    def answer_delta(self, progress: Progress | None, uri: str, delta: str, turn: int, done: bool = False) -> None:
        if not self.stream:
            return
        if delta:
            if self._streamed_turn != turn and self._line_open:
                sys.stdout.write("\n")
            self._streamed_turn = turn
            self.streamed = True
            sys.stdout.write(delta)
            self._line_open = not delta.endswith("\n")
        elif done and self._line_open:
            sys.stdout.write("\n")
            self._line_open = False
        sys.stdout.flush()

    def log(self, level: str, message: str) -> None:
        if level in ("warning", "error"):
            print(f"{level}: {message}", file=sys.stderr)

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr)
