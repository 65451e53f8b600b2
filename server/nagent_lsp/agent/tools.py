"""Running the model's actions inside an editor session; each returns the result block for the conversation.

Refusals and failures are results the model reads, never exceptions that end the run.
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.read import read_action
from nagent_lsp.agent.run import EditSession
from nagent_lsp.agent.sandbox import Refused, confine_read
from nagent_lsp.agent.shell import run_shell
from nagent_lsp.agent.splits import plan_patch, refresh_split, split_text
from nagent_lsp.agent.write_policy import check_write
from nagent_lsp.core.errors import PatchError, SplitError
from nagent_lsp.core.identity import sha256_hex
from nagent_lsp.core.limits import INLINE_LIMIT
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.splits import SplitResult, find_split_dirs, load_index
from nagent_lsp.tags import (
    Action,
    FilePatch,
    FileRead,
    Read,
    Shell,
    Write,
    render_result,
)


async def execute(session: EditSession, action: Action) -> str:
    """Run one tool action (sub-conversations are the loop's: a child runs the loop itself)."""
    if isinstance(action, Read):
        return _read(session, action.path)
    if isinstance(action, FileRead):
        return _file_read(session, action.path)
    if isinstance(action, FilePatch):
        return _file_patch(session, action.index)
    if isinstance(action, Write):
        return _write(session, action.path, action.content)
    if isinstance(action, Shell):
        return await _shell(session, action.command)
    raise TypeError(f"not an executable action: {action!r}")


def _is_target(session: EditSession, path: Path | None) -> bool:
    return path is not None and path == session.target.resolve()


def _names_target(session: EditSession, path_str: str) -> bool:
    """Whether a read of `path_str` is allowed and means the target (then its staged text is the answer)."""
    try:
        return _is_target(session, confine_read(path_str, session.folders, session.settings.denyRead, base=session.cwd))
    except Refused:
        return False  # read_action gives the refusal its result


def _read(session: EditSession, path_str: str) -> str:
    if _names_target(session, path_str):
        # The model reads back its own staged edits, not the text it started from.
        if len(session.staged.encode("utf-8")) > INLINE_LIMIT:
            return render_result(
                "read", {"path": path_str, "error": f'file too large; use <nagent-file-read path="{path_str}"/>'}
            )
        return render_result("read", {"path": path_str}, session.staged)
    outcome = read_action(path_str, session.port, session.folders, session.settings.denyRead, base=session.cwd)
    if not outcome.ok:
        return render_result("read", {"path": path_str, "error": outcome.error})
    return render_result("read", {"path": path_str}, outcome.text)


def _file_read(session: EditSession, path_str: str) -> str:
    try:
        path = confine_read(path_str, session.folders, session.settings.denyRead, base=session.cwd)
    except Refused as exc:
        return render_result("file-read", {"path": path_str, "error": f"read refused: {exc.reason}"})
    if _is_target(session, path):
        text = session.staged
    else:
        outcome = read_action(
            path_str, session.port, session.folders, session.settings.denyRead, base=session.cwd, limit=1 << 40
        )
        if not outcome.ok:
            return render_result("file-read", {"path": path_str, "error": outcome.error})
        text = outcome.text or ""
    size = len(text.encode("utf-8"))
    if size <= INLINE_LIMIT:
        return render_result("file-read", {"path": path_str, "mode": "inline", "size_bytes": size}, text)
    try:
        result = _existing_split(session, path, text) or split_text(text, path, session.splits_root())
    except SplitError as exc:
        return render_result("file-read", {"path": path_str, "error": str(exc)})
    segments = result.index["segments"]
    lines = [
        f"The file is larger than {INLINE_LIMIT} bytes and was split.",
        f"index_path: {result.index_path}",
        "segments:",
    ]
    lines += [
        f"- segment {i}: lines {s['start_line_num']}-{s['end_line_num']} at {s['path']}"
        for i, s in enumerate(segments, 1)
    ]
    if _is_target(session, path):
        lines.append(
            "Edit segment files with <nagent-write>, then merge them with "
            f'<nagent-file-patch index="{result.index_path}"/>.'
        )
    else:
        lines.append("Read the segments you need with <nagent-read>; this file is read-only in this session.")
    session.report(f"split {path.name} into {len(segments)} segments")
    attrs = {
        "path": path_str,
        "mode": "split",
        "size_bytes": size,
        "index_path": result.index_path,
        "segment_count": len(segments),
    }
    return render_result("file-read", attrs, "\n".join(lines))


def _existing_split(session: EditSession, path: Path, text: str) -> SplitResult | None:
    """A split of exactly this text made earlier (reading a large file twice must not split it twice)."""
    digest = sha256_hex(text.encode("utf-8"))
    file_id = session.file_id if _is_target(session, path) else None
    for folder in find_split_dirs(session.splits_root(), path, file_id):
        try:
            index = load_index(folder / "index.json")
        except SplitError:
            continue
        if index.get("source_sha256") == digest and all(Path(s["path"]).is_file() for s in index["segments"]):
            return SplitResult(folder / "index.json", index)
    return None


def _file_patch(session: EditSession, index_str: str) -> str:
    index_path = Path(index_str).expanduser()
    if not index_path.is_absolute():
        index_path = session.splits_root() / index_path
    index_path = index_path.resolve()
    if index_path.parent.parent != session.splits_root().resolve():
        return render_result(
            "file-patch",
            {"index": index_str, "status": "error"},
            "only splits made in this workspace's .nagent/splits can be patched",
        )
    if index_path.parent not in [
        d.resolve() for d in find_split_dirs(session.splits_root(), session.target, session.file_id)
    ]:
        return render_result(
            "file-patch",
            {"index": index_str, "status": "error"},
            f"this index does not belong to {session.target}; only the target may be patched",
        )
    try:
        # force: the staged text legitimately differs from the split source after earlier staged writes.
        plan = plan_patch(index_path, session.staged, force=True)
    except PatchError as exc:
        return render_result("file-patch", {"index": index_str, "status": "error"}, str(exc))
    changed = plan.merged != session.staged
    session.staged = plan.merged
    refresh_split(index_path, plan.merged)  # keep the segments describing the staged text for further edits
    attrs = {
        "index": index_str,
        "status": "ok",
        "changed": "true" if changed else "false",
        "source_path": session.target,
    }
    return render_result("file-patch", attrs)


def _write(session: EditSession, path_str: str, content: str) -> str:
    segment_dirs = find_split_dirs(session.splits_root(), session.target, session.file_id)
    try:
        where = check_write(path_str, session.target, segment_dirs, target_file_id=session.file_id, base=session.cwd)
    except Refused as exc:
        return render_result("write", {"path": path_str, "status": "error"}, exc.reason)
    if where.kind == "target":
        session.staged = content
        staged_note = "staged"
    else:
        atomic_write_text(where.path, content)  # segments are server-owned working files
        staged_note = "segment"
    attrs = {
        "path": path_str,
        "status": "ok",
        "resolved": where.path,
        "bytes": len(content.encode("utf-8")),
        "lines": content.count("\n"),
        "kind": staged_note,
    }
    session.report(f"wrote {where.path.name}")
    return render_result("write", attrs)


async def _shell(session: EditSession, command: str) -> str:
    decision = await session.permission.decide(session.settings.shell, command, session.port, str(session.cwd))
    if not decision.allowed:
        return render_result("shell", {"status": "error"}, f"not run: {decision.reason}")
    session.report(f"running: {command.splitlines()[0][:60] if command.strip() else command}")
    result = await run_shell(
        command,
        session.cwd,
        session.settings.shellTimeout,
        session.cancel,
        session.outputs_dir(),
        hide_env=[session.settings.apiKeyEnv],
        redact=session.secrets,
        isolate=True,
    )
    return render_result("shell", None, result.describe(session.settings.shellTimeout))
