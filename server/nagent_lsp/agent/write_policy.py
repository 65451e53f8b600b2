"""Where the model may write (DESIGN §5.4, §9): `resolve_write` is the one write check `<nagent-write>` and
`<nagent-replace>` share.

`writeScope: "target"`: the target or its split segments, nothing else (`check_write`). `writeScope: "workspace"`
(the default) adds any regular file inside the workspace folders and new files there, except what `denyWrite` or
`denyRead` match (case-insensitively, on the resolved path relative to its folder, and on the path as written; a
denyWrite glob also on every tail of it, so `.git/**` covers a nested repository's `.git`) and the state root. No
deletes. Then the session's `write_permission` hook (agent permissions) has its say.

Nothing is written here: the caller stages the text (`EditSession.stage`) and nothing reaches disk during the run.
"""

from __future__ import annotations

import inspect
import os
import stat
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from nagent_lsp.agent.changeset import WriteTarget
from nagent_lsp.agent.confine import Refused, containing_folder, denied_at_any_depth, denied_by, resolve_in
from nagent_lsp.agent.splits import trusted_splits_of
from nagent_lsp.core.identity import file_id_for
from nagent_lsp.store.split_index import INDEX

if TYPE_CHECKING:
    from nagent_lsp.agent.run import EditSession


async def resolve_write(session: EditSession, path_str: str) -> WriteTarget:
    """Where a write of `path_str` may go, or `Refused` with the reason the model reads."""
    if not path_str or "\0" in path_str:
        raise Refused("write not allowed: empty or invalid path")
    if session.main:  # the main conversation has no target nor splits of one: the workspace rule alone decides
        if session.settings.writeScope == "target":
            raise Refused('write not allowed: the main conversation has no target (the writeScope setting is "target")')
        return await _permitted(session, _workspace_write(session, path_str))
    segments: set[Path] = set()
    for split in trusted_splits_of(session.splits_root(), session.target, session.read_rules(), session.file_id):
        session.splits.remember(split)
    target = session.target.resolve()
    for split in session.splits.splits.values():
        if split.source == target or _same_file(split.source, session.file_id):
            segments.update(split.paths)
    try:
        where = check_write(
            path_str, session.target, target_file_id=session.file_id, base=session.cwd, segments=segments
        )
    except Refused as exc:
        if session.settings.writeScope == "target":
            raise Refused(f'{exc.reason} (the writeScope setting is "target")') from None
        where = _workspace_write(session, path_str)
    return await _permitted(session, where)


async def _permitted(session: EditSession, where: WriteTarget) -> WriteTarget:
    """The session's write permission (the agent's allow/ask/deny) has the last word on a write the scope allows."""
    allowed = session.write_permission(where.path)
    if inspect.isawaitable(allowed):
        allowed = await allowed
    ok, reason = allowed
    if not ok:
        raise Refused(f"write not allowed: {reason or 'the agent may not write ' + str(where.path)}")
    return where


def scope_refusal(session: EditSession, path_str: str) -> str | None:
    """Why writeScope, denyWrite or denyRead would refuse a write of `path_str`, a file other than the target; None
    when they allow it (the agent's write permission, which may ask the user, is left to the write itself)."""
    if session.settings.writeScope == "target":
        return 'the writeScope setting is "target"'
    try:
        _workspace_write(session, path_str)
    except Refused as exc:
        return exc.reason
    return None


def _same_file(path: Path, file_id: str) -> bool:
    try:
        return file_id_for(path) == file_id
    except OSError:
        return False


def _workspace_write(session: EditSession, path_str: str) -> WriteTarget:
    """`writeScope: "workspace"`: an existing regular file or a new file inside a workspace folder."""
    rules = session.read_rules()
    try:
        requested = Path(os.path.expanduser(path_str))
        lexical = Path(os.path.normpath(requested if requested.is_absolute() else session.cwd / requested))
        resolved = resolve_in(path_str, session.cwd)
    except (OSError, RuntimeError, ValueError) as exc:
        raise Refused(f"write not allowed: the path cannot be resolved ({exc})") from None
    folder = containing_folder(resolved, rules.folders)
    if folder is None or resolved == folder:
        shown = ", ".join(str(f) for f in rules.folders) or "none open"
        raise Refused(f"write not allowed: {path_str} is outside the workspace folders ({shown})")
    state_root = session.state_root.resolve()
    if resolved == state_root or state_root in resolved.parents:
        raise Refused(f"write not allowed: {path_str} is in nagent's state folder {state_root}")
    for candidate, base in ((resolved, folder), (lexical, containing_folder(lexical, rules.folders))):
        if base is None:
            continue
        relative = PurePosixPath(candidate.relative_to(base).as_posix())
        glob = denied_at_any_depth(relative, session.settings.denyWrite)
        if glob is not None:
            raise Refused(f"write not allowed: {path_str} matches the denyWrite pattern {glob!r}")
        glob = denied_by(relative, rules.deny)
        if glob is not None:
            raise Refused(f"write not allowed: {path_str} matches the denyRead pattern {glob!r}")
    try:
        info = resolved.stat()
    except FileNotFoundError:
        return _new_file(resolved, folder, path_str)
    except OSError as exc:
        raise Refused(f"write not allowed: {path_str} cannot be examined ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise Refused(f"write not allowed: {path_str} is {kind}; only regular files are written")
    return WriteTarget("file", resolved)


def _new_file(resolved: Path, folder: Path, path_str: str) -> WriteTarget:
    """A file to create: every existing folder on the way must be a folder inside the workspace."""
    parent = resolved.parent
    while parent != folder and not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise Refused(f"write not allowed: {path_str} cannot be created ({parent} is not a folder)")
    return WriteTarget("new", resolved)


def check_write(
    path_str: str,
    target: Path,
    allowed_segment_dir: Path | Iterable[Path] | None = None,
    *,
    target_file_id: str | None = None,
    base: Path | None = None,
    segments: Collection[Path] = (),
) -> WriteTarget:
    """Where a write may go, or `Refused`.

    Allowed: the target by path; the file whose id is the session's file id (the target was renamed while
    the model worked); one of `segments` (resolved paths of the target's trusted splits, as the run knows
    them); an existing file inside one of `allowed_segment_dir` (not its index.json).
    Relative paths are taken from `base` (default: the target's folder). New files are never allowed: this is the
    rule of `writeScope: "target"` (`resolve_write` adds the workspace rule)."""
    target = Path(target).resolve()
    refusal = f"write not allowed: only {target} or its split segments may be edited in this session"
    if not path_str or "\0" in path_str:
        raise Refused(refusal)
    try:
        resolved = resolve_in(path_str, Path(base) if base is not None else target.parent)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise Refused(f"write not allowed: {exc}") from exc
    if resolved == target:
        return WriteTarget("target", resolved)
    if resolved in segments:
        return WriteTarget("segment", resolved)
    if target_file_id and resolved.is_file():
        try:
            if file_id_for(resolved) == target_file_id:
                return WriteTarget("target", resolved)
        except OSError:
            pass
    if allowed_segment_dir is None:
        dirs: list[Path] = []
    elif isinstance(allowed_segment_dir, (str, os.PathLike)):
        dirs = [Path(allowed_segment_dir)]
    else:
        dirs = [Path(d) for d in allowed_segment_dir]
    for directory in dirs:
        directory = directory.resolve()
        if directory in resolved.parents and resolved.name != INDEX and resolved.is_file():
            return WriteTarget("segment", resolved)
    raise Refused(refusal)


def review_reason(path: Path, folders: Iterable[Path], review_always: Iterable[str]) -> str | None:
    """Why a change to `path` must be reviewed whatever `confirmEdits` says (DESIGN §12), or None: it matches a
    `reviewAlways` glob (on every tail of its path inside its workspace folder, as denyWrite is matched), or the
    file is executable — something a tool runs by itself later, where a wrong line costs more than a review."""
    globs = tuple(review_always)
    resolved = path.resolve()
    folder = containing_folder(resolved, [f.resolve() for f in folders])
    relative = PurePosixPath((resolved.relative_to(folder) if folder is not None else Path(resolved.name)).as_posix())
    glob = denied_at_any_depth(relative, globs)
    if glob is not None:
        return f"{relative} matches the reviewAlways pattern {glob!r}"
    try:
        mode = resolved.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) and mode & 0o111:
        return f"{relative} is executable"
    return None
