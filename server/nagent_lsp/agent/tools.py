"""Running the model's actions inside an editor session; each returns the result block for the conversation.

Refusals and failures are results the model reads, never exceptions that end the run.

The write path: `agent.write_policy.resolve_write(session, path)` says where a write may go (or `Refused`, with the
reason for the model), `session.text_of(where)` is that file's text as the run sees it and `session.stage(where,
text)` stages new text. `<nagent-write>` and `<nagent-replace>` both go through that one pair; reads of a staged file
(`<nagent-read>`, `<nagent-file-read>`) answer its staged text.
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.confine import Refused, resolve_in
from nagent_lsp.agent.mcp_tools import no_tools_result
from nagent_lsp.agent.read import read_with
from nagent_lsp.agent.run import EditSession
from nagent_lsp.agent.shell import run_shell
from nagent_lsp.agent.splits import TrustedSplit, load_trusted_split, plan_patch, split_text, trusted_splits_of
from nagent_lsp.agent.write_policy import resolve_write, scope_refusal
from nagent_lsp.core.errors import PatchError, SplitError, UserError
from nagent_lsp.core.identity import file_id_for, sha256_hex
from nagent_lsp.core.limits import INLINE_LIMIT
from nagent_lsp.store.files import decode_text, read_regular_bytes
from nagent_lsp.store.split_index import INDEX, read_segment
from nagent_lsp.tags import (
    Action,
    FilePatch,
    FileRead,
    Read,
    Replace,
    Shell,
    Tool,
    Write,
    render_result,
)
from nagent_lsp.text.search_replace import ReplaceFailed, apply_blocks


async def execute(session: EditSession, action: Action) -> str:
    """Run one tool action (sub-conversations are the loop's: a child runs the loop itself)."""
    if isinstance(action, Read):
        return _read(session, action.path)
    if isinstance(action, FileRead):
        return _file_read(session, action.path)
    if isinstance(action, FilePatch):
        return _file_patch(session, action.index)
    if isinstance(action, Write):
        return await _write(session, action.path, action.content)
    if isinstance(action, Replace):
        return await _replace(session, action)
    if isinstance(action, Shell):
        return await _shell(session, action.command)
    if isinstance(action, Tool):
        if session.mcp is None:
            return no_tools_result(action.name)
        session.report(f"calling {action.name}")
        result = await session.mcp.run(action.name, action.arguments, session.port)
        for secret in session.secrets:  # a tool that echoes its environment must not hand the key to the model
            result = result.replace(secret, "[redacted]")
        return result
    raise TypeError(f"not an executable action: {action!r}")


def _is_target(session: EditSession, path: Path | None) -> bool:
    return not session.main and path is not None and path == session.target.resolve()  # main mode: no target


def _names_target(session: EditSession, path_str: str) -> bool:
    """Whether a read of `path_str` is allowed and means the target (then its staged text is the answer)."""
    try:
        return _is_target(session, session.read_rules().confine(path_str, base=session.cwd))
    except Refused:
        return False  # read_with gives the refusal its result


def _run_segment(session: EditSession, path_str: str) -> tuple[Path, str] | None:
    """A read of a segment of a split this run knows or can trust: (its path, its text as the run sees it).

    Segments live in the state root's splits folder, which may lie outside the workspace (the stateRoot
    setting); they are copies of a confined source, so reading them is allowed. A segment the run wrote or
    re-split is read from memory: the run sees its own edits, nobody else does."""
    try:
        path = resolve_in(path_str, session.cwd)
    except (OSError, RuntimeError, ValueError):
        return None
    if path.parent.parent != session.splits_root().resolve():
        return None
    split = session.splits.owner(path)
    if split is None:
        try:
            trusted = load_trusted_split(path.parent / INDEX, session.read_rules(), [session.splits_root()])
        except SplitError:
            return None
        if path not in trusted.paths:
            return None
        split = session.splits.remember(trusted)
        if path not in split.paths:  # the run re-split it meanwhile: the name is not one of its segments now
            return None
    text = session.splits.text(path)
    if text is None:
        try:
            text = read_segment(path, session.settings.maxFileBytes).decode("utf-8")
        except (SplitError, UnicodeDecodeError):
            return None
    return path, text


def _staged_other(session: EditSession, path_str: str) -> str | None:
    """The staged text of a non-target file this run wrote (or created), when `path_str` names it."""
    if not session.changes.files:
        return None
    try:
        path = resolve_in(path_str, session.cwd)
    except (OSError, RuntimeError, ValueError):
        return None
    staged = session.changes.get(path)
    if staged is None or not session.read_rules().allows(path):
        return None
    return staged.text


def _server_output(session: EditSession, path_str: str) -> str | None:
    """A read of a file the server itself keeps in the state root's outputs/ (a stripped reply's raw text, a long
    shell output), which the conversation points to; allowed wherever the state root lies. None: not one."""
    try:
        path = resolve_in(path_str, session.cwd)
        if path.parent != session.outputs_dir().resolve():
            return None
    except (OSError, RuntimeError, ValueError):
        return None
    try:
        text = decode_text(path, read_regular_bytes(path, INLINE_LIMIT, follow_symlinks=False))
    except (OSError, UserError) as exc:
        error = getattr(exc, "strerror", None) or str(exc)
        return render_result("read", {"path": path_str, "error": f"cannot read it: {error}"})
    return render_result("read", {"path": path_str}, text)


def _read(session: EditSession, path_str: str) -> str:
    other = _staged_other(session, path_str)
    if other is not None:
        if len(other.encode("utf-8")) > INLINE_LIMIT:
            return render_result("read", {"path": path_str, "error": f"file too large ({INLINE_LIMIT} bytes max)"})
        return render_result("read", {"path": path_str}, other)
    if _names_target(session, path_str):
        # The model reads back its own staged edits, not the text it started from.
        if len(session.staged.encode("utf-8")) > INLINE_LIMIT:
            return render_result(
                "read", {"path": path_str, "error": f'file too large; use <nagent-file-read path="{path_str}"/>'}
            )
        return render_result("read", {"path": path_str}, session.staged)
    segment = _run_segment(session, path_str)
    if segment is not None:
        text = segment[1]
        if len(text.encode("utf-8")) > INLINE_LIMIT:
            return render_result("read", {"path": path_str, "error": f"segment too large ({INLINE_LIMIT} bytes max)"})
        return render_result("read", {"path": path_str}, text)
    output = _server_output(session, path_str)
    if output is not None:
        return output
    outcome = read_with(session.read_rules(), path_str, session.port, base=session.cwd)
    if not outcome.ok:
        return render_result("read", {"path": path_str, "error": outcome.error})
    return render_result("read", {"path": path_str}, outcome.text)


def _file_read(session: EditSession, path_str: str) -> str:
    rules = session.read_rules()
    try:
        path = rules.confine(path_str, base=session.cwd)
    except Refused as exc:
        return render_result("file-read", {"path": path_str, "error": f"read refused: {exc.reason}"})
    other = session.changes.get(path)
    if _is_target(session, path):
        text = session.staged
    elif other is not None:
        text = other.text
    else:
        outcome = read_with(rules, path_str, session.port, base=session.cwd, limit=rules.max_bytes)
        if not outcome.ok:
            return render_result("file-read", {"path": path_str, "error": outcome.error})
        text = outcome.text or ""
    size = len(text.encode("utf-8"))
    if size <= INLINE_LIMIT:
        return render_result("file-read", {"path": path_str, "mode": "inline", "size_bytes": size}, text)
    try:
        split = _existing_split(session, path, text) or _new_split(session, path, text)
    except (SplitError, OSError) as exc:
        return render_result("file-read", {"path": path_str, "error": f"could not split: {exc}"})
    segments = split.index["segments"]
    lines = [
        f"The file is larger than {INLINE_LIMIT} bytes and was split.",
        f"index_path: {split.index_path}",
        "segments:",
    ]
    lines += [
        f"- segment {i}: lines {s['start_line_num']}-{s['end_line_num']} at {p}"
        for i, (s, p) in enumerate(zip(segments, split.paths, strict=False), 1)
    ]
    if _is_target(session, path):
        lines.append(
            "Edit segment files with <nagent-write>, then merge them with "
            f'<nagent-file-patch index="{split.index_path}"/>.'
        )
    else:
        lines.append(_other_file_note(session, path_str))
    session.report(f"split {path.name} into {len(segments)} segments")
    attrs = {
        "path": path_str,
        "mode": "split",
        "size_bytes": size,
        "index_path": split.index_path,
        "segment_count": len(segments),
    }
    return render_result("file-read", attrs, "\n".join(lines))


def _other_file_note(session: EditSession, path_str: str) -> str:
    """What the model may do with a split file that is not the target: its segments are copies to read (only the
    target's split merges back), and the file itself is written as any other file is, when the session allows it."""
    refusal = scope_refusal(session, path_str)
    if refusal is not None:
        return f"Read the segments you need with <nagent-read>; this file is read-only in this session ({refusal})."
    quoted = path_str.replace("&", "&amp;").replace('"', "&quot;")
    return (
        "Read the segments you need with <nagent-read>. They are copies for reading: only the target's segments are "
        f'merged back. To change this file, use <nagent-replace path="{quoted}"> (any size of file) or '
        f'<nagent-write path="{quoted}"> with its complete new content.'
    )


def _existing_split(session: EditSession, path: Path, text: str) -> TrustedSplit | None:
    """A split of exactly this text, known to this run or made earlier and trusted (reading a large file twice
    must not split it twice). One from disk is used only when its segments still hold exactly this text."""
    digest = sha256_hex(text.encode("utf-8"))
    for split in session.splits.splits.values():
        if split.source == path and split.index.get("source_sha256") == digest:
            session.splits.used.add(split.index_path)
            return split
    file_id = session.file_id if _is_target(session, path) else None
    rules = session.read_rules()
    for split in trusted_splits_of(session.splits_root(), path, rules, file_id):
        if split.index.get("source_sha256") != digest:
            continue
        try:
            if plan_patch(split, text, max_bytes=rules.max_bytes).merged != text:
                continue  # its segment files were changed since: not a split of this text any more
        except PatchError:
            continue
        return session.splits.remember(split, use=True)
    return None


def _new_split(session: EditSession, path: Path, text: str) -> TrustedSplit:
    """Split `text` of `path`: on disk when it is what the user has (nothing the run changed), else in memory,
    so a run's unapplied edits never sit in a split folder another run or command could merge."""
    if _is_target(session, path) and session.edited():
        return session.splits.in_memory_split(text, path, session.splits_root())
    result = split_text(text, path, session.splits_root())
    split = TrustedSplit(result.index_path.resolve(), result.index, path)
    return session.splits.remember(split, use=True)


def _file_patch(session: EditSession, index_str: str) -> str:
    error = {"index": index_str, "status": "error"}
    index_path = Path(index_str).expanduser()
    if not index_path.is_absolute():
        index_path = session.splits_root() / index_path
    try:
        index_path = index_path.resolve()
    except (OSError, RuntimeError):
        return render_result("file-patch", error, "the index path cannot be resolved")
    split = session.splits.splits.get(index_path)
    if split is None:
        try:
            split = load_trusted_split(index_path, session.read_rules(), [session.splits_root()])
        except SplitError as exc:
            return render_result("file-patch", error, str(exc))
        split = session.splits.remember(split)
    if not _is_target(session, split.source) and not _same_file(split.source, session.file_id):
        return render_result(
            "file-patch", error, f"this index does not belong to {session.target}; only the target may be patched"
        )
    try:
        plan = plan_patch(split, session.staged, staged=session.splits.texts, max_bytes=session.settings.maxFileBytes)
    except PatchError as exc:
        if "source hash does not match" in str(exc):
            return render_result(
                "file-patch",
                error,
                "the target has changed since this split was made (a write to the target itself, or a merge of "
                f'another split); read it again with <nagent-file-read path="{session.target}"/> and edit the '
                "segments of the new split",
            )
        return render_result("file-patch", error, str(exc))
    changed = plan.merged != session.staged
    session.staged = plan.merged
    session.splits.resplit(split, plan.merged)  # the segments describe the staged text for further edits
    attrs = {
        "index": index_str,
        "status": "ok",
        "changed": "true" if changed else "false",
        "source_path": session.target,
    }
    return render_result("file-patch", attrs)


def _same_file(path: Path, file_id: str) -> bool:
    try:
        return file_id_for(path) == file_id
    except OSError:
        return False


async def _write(session: EditSession, path_str: str, content: str) -> str:
    try:
        where = await resolve_write(session, path_str)
        if where.kind in ("file", "new"):
            session.text_of(where)  # an existing file must be readable text before it is replaced
    except Refused as exc:
        return render_result("write", {"path": path_str, "status": "error"}, exc.reason)
    session.stage(where, content)
    kind = {"target": "staged", "segment": "segment", "file": "staged", "new": "created"}[where.kind]
    attrs = {
        "path": path_str,
        "status": "ok",
        "resolved": where.path,
        "bytes": len(content.encode("utf-8")),
        "lines": content.count("\n"),
        "kind": kind,
    }
    session.report(f"wrote {where.path.name}")
    return render_result("write", attrs)


async def _replace(session: EditSession, action: Replace) -> str:
    """`<nagent-replace>` (DESIGN §11): the write path of `_write` (same policy, same staging), applied to the text
    the run sees now (its staged edits included), whatever its size; every block applies or none does."""
    path_str = action.path
    try:
        where = await resolve_write(session, path_str)
        if where.kind == "new":
            raise Refused(f"{where.path} does not exist; create it with <nagent-write>")
        current = session.text_of(where)
    except Refused as exc:
        return render_result("replace", {"path": path_str, "status": "error"}, exc.reason)
    try:
        applied = apply_blocks(current, action.blocks, path_str)
    except ReplaceFailed as exc:
        attrs = {"path": path_str, "status": "error", "block": exc.block, "blocks": exc.total}
        return render_result("replace", attrs, exc.message)
    session.stage(where, applied.text)
    session.report(f"replaced {applied.blocks} block(s) in {where.path.name}")
    attrs = {
        "path": path_str,
        "status": "ok",
        "resolved": where.path,
        "blocks": applied.blocks,
        "at_lines": ",".join(str(start) for start, _ in applied.lines),
        "whitespace_tolerant": applied.tolerant or None,
    }
    return render_result("replace", attrs)


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
