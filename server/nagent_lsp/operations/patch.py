"""`nagent.patch {indexPath, force?, dryRun?}` -> `{changed, applied, uri, edits, patchPath}`.

Validates the index against the text the user sees (the open buffer), merges the segments, and delivers the
merged text through the port (minimal edits via workspace/applyEdit in an editor), never by writing the
source file behind the editor's back. The diff goes under `<state root>/patches/`; the index is refreshed
to describe the new text once it is applied.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nagent_lsp.agent.splits import plan_patch, refresh_after_apply
from nagent_lsp.core.errors import PatchError, SplitError, UserError
from nagent_lsp.core.ports import EditorPort, FileChange
from nagent_lsp.operations.args import PatchArgs
from nagent_lsp.operations.buffers import read_source
from nagent_lsp.operations.session import Session
from nagent_lsp.store.patches import write_patch
from nagent_lsp.store.splits import load_index
from nagent_lsp.text.edits import minimal_edits, unified_diff


def _index_path(raw: str, port: EditorPort | None) -> Path:
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        folders = port.workspace_folders() if port is not None else []
        path = (folders[0] if folders else Path.cwd()) / path
    return path


def _label(path: Path, port: EditorPort | None) -> str:
    """The diff's file name: workspace-relative when possible, like a git diff."""
    for folder in port.workspace_folders() if port is not None else []:
        try:
            return path.relative_to(folder).as_posix()
        except ValueError:
            continue
    return path.name


async def patch(session: Session, port: EditorPort, args: PatchArgs) -> dict[str, Any]:
    index_path = _index_path(args.indexPath, port)
    try:
        source = Path(load_index(index_path)["source_path"])
    except SplitError as exc:
        raise UserError(str(exc)) from None
    buffer = read_source(port, source)
    try:
        plan = plan_patch(index_path, buffer.text, force=args.force)
    except PatchError as exc:
        raise UserError(str(exc)) from None
    result: dict[str, Any] = {
        "changed": plan.changed,
        "applied": False,
        "uri": buffer.uri,
        "edits": 0,
        "patchPath": None,
    }
    if not plan.changed:
        return result
    patches_dir = session.state_dir(source, "patches")
    label = _label(source, port)
    if args.dryRun:
        # Nothing applied, nothing re-indexed; the diff is written so the user can read what would change.
        result["edits"] = len(minimal_edits(buffer.text, plan.merged))
        written = write_patch(patches_dir, source, unified_diff(buffer.text, plan.merged, label))
        result["patchPath"] = str(written) if written else None
        return result
    outcome = await port.apply_change(
        FileChange(
            path=source,
            uri=buffer.uri,
            base_text=buffer.text,
            new_text=plan.merged,
            base_version=buffer.version,
            label=f"nagent: patch {source.name}",
        )
    )
    result["edits"] = outcome.edits
    if not outcome.applied:
        port.log("warning", f"patch of {source} not applied: {outcome.reason}")
        return result
    final = outcome.final_text if outcome.final_text is not None else plan.merged
    result["applied"] = True
    written = write_patch(patches_dir, source, unified_diff(buffer.text, final, label))
    result["patchPath"] = str(written) if written else None
    refresh_after_apply(plan, final)
    return result
