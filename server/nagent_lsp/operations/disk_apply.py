"""A change set written to the disk as one transaction: what a front end without editor buffers does (the CLI's
`DiskPort`, and ACP when the client offers no `fs/write_text_file`). Moved here from headless/port.py so both
front ends share the one disk path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nagent_lsp.config.state_root import resolve_state_root
from nagent_lsp.core.ports import ApplyOutcome, FileChange, FileOutcome, Records
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.store.root import ensure_root
from nagent_lsp.store.transaction import Write, commit

if TYPE_CHECKING:
    from nagent_lsp.text.merge import ChangeSetPlan, Current

# text.merge and text.edits are imported where they are used: `nagent-lsp patch` and `split` load this module with the
# CLI's port and never merge three ways (13 ms of dataclasses and regexes at every start).


def on_disk(change: FileChange) -> Current:
    """A file's current text on the disk (None: it does not exist)."""
    from nagent_lsp.text.merge import Current

    exists = change.path.exists()
    return Current(read_disk_text(change.path) if exists else None, None, change.uri)


def outcomes(plan: ChangeSetPlan) -> tuple[FileOutcome, ...]:
    """Each planned file as the port reports it applied."""
    from nagent_lsp.text.edits import minimal_edits

    return tuple(
        FileOutcome(
            p.change.path,
            p.uri,
            len(minimal_edits(p.current, p.target, "utf-32")) or 1,
            p.change.created,
            p.current,
            p.target,
        )
        for p in plan.files
    )


async def write_records(
    folders: Sequence[Path], files: Sequence[FileOutcome], records: Records | None, with_files: bool
) -> None:
    """The files (when `with_files`) and `records` as one transaction (`store.transaction`): all or none."""
    writes = [Write(f.path, f.final_text.encode("utf-8")) for f in files] if with_files else []
    if records is not None:
        state_root = records.state_root
        writes += [Write(r.path, None if r.text is None else r.text.encode("utf-8")) for r in records.make(files)]
    else:
        state_root = resolve_state_root(files[0].path, list(folders)).path
    if writes:
        import asyncio  # imported where used: the CLI's patch and split load this module and never run it

        await asyncio.to_thread(commit, ensure_root(state_root), writes)


async def apply_on_disk(
    folders: Sequence[Path], changes: Sequence[FileChange], records: Records | None = None
) -> ApplyOutcome:
    """Every file merged three ways against the disk first (`plan_change_set`); a conflict writes nothing; then
    the files and `records` are written as one transaction: all of them or none, even when the process is killed
    halfway."""
    from nagent_lsp.text.merge import plan_change_set

    plan = plan_change_set(changes, on_disk)
    if plan.conflict is not None:
        return ApplyOutcome(False, 0, plan.reason, plan.conflict_text, conflict=plan.conflict)
    if not plan.files:
        return ApplyOutcome(False, 0, plan.reason or "no change")
    files = outcomes(plan)
    await write_records(folders, files, records, with_files=True)
    return ApplyOutcome(True, sum(f.edits for f in files), None, files[0].final_text, files)
