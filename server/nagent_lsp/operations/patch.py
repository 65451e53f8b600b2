"""`nagent.patch {indexPath, force?, dryRun?}` -> `{changed, applied, uri, edits, patchPath}`.

Validates the index against the text the user sees (the open buffer), merges the segments, and delivers the
merged text through the port (minimal edits via workspace/applyEdit in an editor), never by writing the
source file behind the editor's back. The diff goes under `<state root>/patches/`; the index is refreshed
to describe the new text once it is applied.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.agent.splits import PatchPlan, TrustedSplit, load_trusted_split, plan_patch, refresh_after_apply
from nagent_lsp.agent.streamed_patch import plan_streamed
from nagent_lsp.config.convert import WIRE_NULL
from nagent_lsp.config.state_root import resolve_state_root
from nagent_lsp.core.errors import InvalidArgument, PatchError, SplitError, UserError
from nagent_lsp.core.ports import Buffer, EditorPort, FileChange
from nagent_lsp.operations.args import PatchArgs
from nagent_lsp.operations.buffers import read_rules, read_source, refusal
from nagent_lsp.operations.session import Session
from nagent_lsp.store.patches import write_patch
from nagent_lsp.store.root import ensure_root
from nagent_lsp.store.split_index import UntrustedIndex
from nagent_lsp.store.transaction import Write, commit, signature
from nagent_lsp.text.edits import minimal_edits, unified_diff


@attrs.frozen
class PatchResult:
    """The `nagent.patch` result: whether the segments differ from the text (`changed`), whether the merge was
    applied, the document, how many edits, and the diff written under `<state root>/patches/` (null when none)."""

    changed: bool
    applied: bool
    uri: str
    edits: int
    patchPath: str | None = attrs.field(metadata={WIRE_NULL: True})


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
            return path.relative_to(Path(folder).resolve()).as_posix()
        except ValueError:
            continue
    return path.name


def trusted_index(session: Session, raw: str, port: EditorPort | None) -> TrustedSplit:
    """The index named by the `indexPath` argument, through the one trusted loader: in the splits folder of a
    state root of this workspace (or of the state root its source belongs to), written by the server, its
    segments in its folder, its source inside the workspace."""
    if not raw or "\0" in raw:
        raise InvalidArgument("indexPath", "expected the path of a split's index.json")
    rules = read_rules(session)
    roots = [session.state_root(folder).path / "splits" for folder in session.workspace_folders]
    if not roots:
        roots = [session.state_root(None).path / "splits"]
    try:
        return load_trusted_split(
            _index_path(raw, port), rules, roots, root_of=lambda source: session.state_root(source).path
        )
    except UntrustedIndex as exc:
        raise InvalidArgument("indexPath", str(exc)) from None
    except SplitError as exc:
        raise UserError(str(exc)) from None


def patch_on_disk(session: Session, port: EditorPort, args: PatchArgs) -> PatchResult | None:
    """The CLI's patch without an event loop (the CLI then never imports asyncio): the streamed path when it applies,
    None when `patch` must run (an editor's buffer, force, an index without byte offsets)."""
    split = trusted_index(session, args.indexPath, port)
    if not _on_disk(port, split.source, args):
        return None
    return _patch_on_disk(session, port, split, read_rules(session, split.source), args.dryRun)


async def patch(session: Session, port: EditorPort, args: PatchArgs) -> PatchResult:
    import asyncio  # here, not at the top: `patch_on_disk` runs without it

    split = trusted_index(session, args.indexPath, port)
    rules = read_rules(session, split.source)
    source = split.source
    if _on_disk(port, source, args):
        streamed = await asyncio.to_thread(_patch_on_disk, session, port, split, rules, args.dryRun)
        if streamed is not None:
            return streamed
    buffer = read_source(port, source, rules, field="indexPath")
    try:
        plan = await asyncio.to_thread(plan_patch, split, buffer.text, force=args.force, max_bytes=rules.max_bytes)
    except PatchError as exc:
        raise UserError(str(exc)) from None
    if not plan.changed:
        return PatchResult(changed=False, applied=False, uri=buffer.uri, edits=0, patchPath=None)
    if args.dryRun:
        # Nothing applied, nothing re-indexed; the diff is written so the user can read what would change.
        edits = len(minimal_edits(buffer.text, plan.merged))
        return PatchResult(True, False, buffer.uri, edits, _write_diff(session, port, source, buffer, plan.merged))
    return await _apply(session, port, source, buffer, plan)


async def _apply(session: Session, port: EditorPort, source: Path, buffer: Buffer, plan: PatchPlan) -> PatchResult:
    import asyncio

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
    if not outcome.applied:
        port.log("warning", f"patch of {source} not applied: {outcome.reason}")
        return PatchResult(plan.changed, False, buffer.uri, outcome.edits, None)
    final = outcome.final_text if outcome.final_text is not None else plan.merged
    written = _write_diff(session, port, source, buffer, final)
    await asyncio.to_thread(refresh_after_apply, plan, final)
    return PatchResult(plan.changed, True, buffer.uri, outcome.edits, written)


def _write_diff(session: Session, port: EditorPort, source: Path, buffer: Buffer, new_text: str) -> str | None:
    label = _label(source, port)
    written = write_patch(session.state_dir(source, "patches"), source, unified_diff(buffer.text, new_text, label))
    return str(written) if written else None


def _on_disk(port: EditorPort, source: Path, args: PatchArgs) -> bool:
    """Whether the patch may be streamed to the disk: the port writes files itself (no editor holds a buffer to send
    edits to) and the file is checked against the index (not forced)."""
    return bool(getattr(port, "writes_disk", False)) and not args.force and port.read_buffer(source) is None


def _patch_on_disk(
    session: Session, port: EditorPort, split: TrustedSplit, rules: ReadRules, dry_run: bool
) -> PatchResult | None:
    """The patch computed per changed segment and streamed into one transaction (`agent.streamed_patch`); None
    when the index has no byte offsets (the whole-text path then runs)."""
    source = split.source
    uri = source.as_uri()
    seen = signature(source)  # before the read: a write after it shows in the signature the commit compares
    try:
        data = rules.read_bytes(source)
    except Refused as exc:
        raise refusal(exc, "indexPath") from None
    try:
        plan = plan_streamed(split, data, max_bytes=rules.max_bytes)
    except PatchError as exc:
        raise UserError(str(exc)) from None
    if plan is None:
        return None
    if not plan.changed:
        return PatchResult(changed=False, applied=False, uri=uri, edits=0, patchPath=None)
    diff, edits = plan.diff_and_edits(_label(source, port))
    if not dry_run:
        root = ensure_root(resolve_state_root(source, port.workspace_folders()).path)
        write = Write(
            source,
            None,
            chunks=plan.chunks,
            old_sha256=split.index["source_sha256"],
            old_signature=seen,
            hashed_head=plan.hashed_head(),
        )
        digests = commit(root, [write])
    written = write_patch(session.state_dir(source, "patches"), source, diff)
    patch_path = str(written) if written else None
    if dry_run:
        return PatchResult(True, False, uri, edits, patch_path)
    plan.reindex(digests[0] or "")
    return PatchResult(True, True, uri, edits or 1, patch_path)
