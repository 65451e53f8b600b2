"""Which files an operation may read, and reading them the way the user sees them.

Every operation that takes a file (edit, split, patch, summarize, conversation commands, code actions) asks
`confined_file` first: the session's read rules (agent.sandbox: inside the workspace folders, no denyRead match,
not /proc, /sys or /dev) decide before anything is read or any state root is created. `read_source` then gives
the editor's buffer when the file is open, else the exact text on disk through the bounded reader (a regular
file of at most maxFileBytes; a FIFO or device is refused without being opened). CRLF, a missing final newline
and encoding errors are treated the same everywhere (text is never newline-translated).
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.config.parse_args import file_argument
from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.ports import Buffer, EditorPort
from nagent_lsp.operations.session import Session


def workspace_of(session: Session, target: Path | None = None) -> list[Path]:
    """The folders reads are confined to: the workspace folders; with none open (an editor started on a single
    file), the target's repository, else the target's own folder."""
    if session.workspace_folders:
        return list(session.workspace_folders)
    if target is None:
        return []
    start = target.parent
    top = git_toplevel(str(start))
    return [Path(top) if top else start]


def read_rules(session: Session, target: Path | None = None) -> ReadRules:
    settings = session.settings
    return ReadRules.of(workspace_of(session, target), settings.denyRead, settings.maxFileBytes)


def refusal(exc: Refused, field: str) -> UserError:
    """A refused path as the error a person can act on: InvalidParams naming the argument when the path itself
    may not be read (where it is, its name, its kind, its size); a plain error when it is missing or unreadable."""
    if exc.kind in ("missing", "encoding", "io"):
        return UserError(exc.reason if exc.kind != "missing" else "file not found")
    return InvalidArgument(field, exc.reason)


def confined_file(session: Session, uri: str, field: str = "uri") -> tuple[Path, ReadRules]:
    """The resolved file a `file:` URI argument names, if the read rules allow it, with those rules."""
    path = file_argument(uri, field)
    rules = read_rules(session, Path(path).absolute())
    try:
        return rules.confine(path), rules
    except Refused as exc:
        raise refusal(exc, field) from None


def source_from(path: Path, buffer: Buffer | None, rules: ReadRules, field: str = "uri") -> Buffer:
    """The buffer the user sees (within maxFileBytes), else the disk text through the bounded reader."""
    try:
        if buffer is not None:
            rules.check_text(path, buffer.text)
            return buffer
        text = rules.read_text(path)
    except Refused as exc:
        if exc.kind == "missing":
            raise UserError(f"file not found: {path}") from None
        if not exc.reason.startswith(str(path)):
            exc = Refused(f"{path} {exc.reason}", exc.kind, exc.size)
        raise refusal(exc, field) from None
    return Buffer(path=path, text=text, version=None, uri=path.as_uri())


def read_source(port: EditorPort | None, path: Path, rules: ReadRules | None = None, field: str = "uri") -> Buffer:
    """The buffer the user sees, else the disk text (version None). `path` must have passed `rules` (or
    `confined_file`); without rules only the bounded reader's own limits apply."""
    buffer = port.read_buffer(path) if port is not None else None
    return source_from(path, buffer, rules or ReadRules(()), field)


async def read_source_async(port: EditorPort | None, path: Path, rules: ReadRules, field: str = "uri") -> Buffer:
    """`read_source` with the buffer taken on the event loop (the editor's documents live there) and the disk
    read, which may be large, in a worker thread."""
    buffer = port.read_buffer(path) if port is not None else None
    if buffer is not None and len(buffer.text) * 4 <= rules.max_bytes:
        return buffer
    import asyncio  # only the asynchronous callers pay for it (the CLI's history does not)

    return await asyncio.to_thread(source_from, path, buffer, rules, field)
