"""The conversation commands (DESIGN §4): open, list, clear, save, load; and rename tracking.

Each takes the session, its typed argument and (where the editor is needed) a port, and returns the
contract's result. Clear and load take the file's run lock, so they never cut into a running edit.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import Refused
from nagent_lsp.config.convert import WIRE_NULL
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.identity import looks_like_uri, uri_to_path
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.operations.args import NamedArgs, UriArgs
from nagent_lsp.operations.buffers import read_rules, refusal
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationError, ConversationRef, ConversationStore
from nagent_lsp.store.files import read_disk_text
from nagent_lsp.tags.draft import find_draft


@attrs.frozen
class OpenedConversation:
    """`nagent.conversation.open`: the conversation file (created empty if needed), whether the editor showed
    it (`window/showDocument`), and `draftLine`: the 0-based line where the next request is typed (tags.draft)."""

    path: str
    shown: bool
    draftLine: int


@attrs.frozen
class ConversationEntry:
    fileId: str
    path: str  # the file the conversation is about
    conversation: str  # the conversation file


@attrs.frozen
class ConversationList:
    """`nagent.conversation.list`: every conversation of the workspace's state roots, by file path."""

    files: list[ConversationEntry]


@attrs.frozen
class ArchivedConversation:
    """`nagent.conversation.clear`: where the conversation was archived (null: there was none)."""

    archivedPath: str | None = attrs.field(metadata={WIRE_NULL: True})


@attrs.frozen
class ConversationPath:
    """`nagent.conversation.save` (the saved copy) and `.load` (the conversation file it replaced)."""

    path: str


def target_path(uri: str) -> Path | None:
    """The file behind a `file:` URI or a plain path; None for a buffer with no file (untitled:...)."""
    if looks_like_uri(uri):
        return uri_to_path(uri)
    path = Path(os.path.expanduser(uri))
    if not path.is_absolute():
        raise InvalidArgument("uri", f"expected a URI or an absolute path, got {uri!r}")
    return path


def confined_target(session: Session, uri: str) -> Path | None:
    """`target_path`, held to the read rules: a conversation belongs to a file inside the workspace (that no
    denyRead glob matches), so no command makes a `.nagent/` in a repository outside it."""
    target = target_path(uri)
    if target is None:
        return None
    try:
        return read_rules(session, target.absolute()).confine(target)
    except Refused as exc:
        raise refusal(exc, "uri") from None


def store_for(session: Session, target: Path | None, create: bool = True) -> ConversationStore:
    """The one store of the state root that holds `target`'s conversation (shared, so run locks are too)."""
    root = session.state_dir(target) if create else session.state_root(target).path
    return session.conversation_store(root)


def resolve(session: Session, uri: str) -> tuple[ConversationStore, ConversationRef]:
    target = confined_target(session, uri)
    store = store_for(session, target)
    try:
        return store, store.resolve(uri if target is None else target)
    except ConversationError as exc:
        raise UserError(str(exc)) from exc


def conversation_ref(session: Session, path: Path) -> ConversationRef | None:
    """When `path` is the conversation file of some file (under its state root's `conversations/`): that file's
    reference. None for any other path."""
    real = Path(os.path.realpath(path))
    root = session.state_root(real).path
    if not real.is_relative_to(Path(os.path.realpath(root)) / "conversations"):
        return None
    store = session.conversation_store(root)
    return next((r for r in store.refs() if os.path.realpath(r.conversation_path) == str(real)), None)


def file_and_conversation(session: Session, uri: str) -> tuple[Path, Path]:
    """(the source file, its conversation file) for `uri`, which names either; InvalidArgument for a buffer
    without a file or a conversation file no file has (an archive, a saved copy)."""
    target = target_path(uri)
    if target is None:
        raise InvalidArgument("uri", f"{uri} is no saved file; save it first")
    ref = conversation_ref(session, target)
    if ref is None:
        if Path(os.path.realpath(target)).is_relative_to(os.path.realpath(session.state_root(target).path)):
            raise InvalidArgument("uri", f"{target} is no file's conversation (an archive or a saved copy?)")
        _, ref = resolve(session, uri)
    if ref.untitled:
        raise InvalidArgument("uri", f"{ref.path} is no saved file; save it first")
    return Path(ref.path), ref.conversation_path


def conversation_text(port: EditorPort, path: Path) -> str:
    """The conversation as the user has it: its open buffer (unsaved edits included), else the file."""
    buffer = port.read_buffer(path)
    return buffer.text if buffer is not None else read_disk_text(path)


async def open_conversation(session: Session, port: EditorPort, args: UriArgs) -> OpenedConversation:
    """A conversation file's `uri` opens that conversation (never "the conversation of the conversation")."""
    target = target_path(args.uri)
    own = conversation_ref(session, target) if target is not None else None
    ref = own if own is not None else resolve(session, args.uri)[1]
    try:
        # Create it empty if needed (never truncate): an editor can only show a file that exists.
        os.close(os.open(ref.conversation_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        pass
    draft = find_draft(conversation_text(port, ref.conversation_path))
    shown = await port.show_document(ref.conversation_path)
    return OpenedConversation(str(ref.conversation_path), bool(shown), draft.line)


def list_conversations(session: Session) -> ConversationList:
    stores: dict[str, ConversationStore] = {}
    targets: list[Path | None] = list(session.workspace_folders) or [None]
    for folder in targets:
        store = store_for(session, folder, create=False)  # listing never creates a state root
        stores.setdefault(str(store.state_root), store)
    files = [
        ConversationEntry(ref.file_id, ref.path, str(ref.conversation_path))
        for store in stores.values()
        for ref in store.refs()
    ]
    return ConversationList(sorted(files, key=lambda f: (f.path, f.fileId)))


async def clear_conversation(session: Session, args: UriArgs) -> ArchivedConversation:
    store, ref = resolve(session, args.uri)
    async with store.lock_for(ref):
        archived = store.archive(ref)
    return ArchivedConversation(str(archived) if archived else None)


def save_conversation(session: Session, args: NamedArgs) -> ConversationPath:
    store, ref = resolve(session, args.uri)
    try:
        return ConversationPath(str(store.save(ref, args.name)))
    except ConversationError as exc:
        raise UserError(str(exc)) from exc


async def load_conversation(session: Session, args: NamedArgs) -> ConversationPath:
    store, ref = resolve(session, args.uri)
    try:
        store.saved_path(args.name)  # a bad name is the user's to fix before anything is archived
    except ConversationError as exc:
        raise InvalidArgument("name", str(exc)) from exc
    async with store.lock_for(ref):
        try:
            return ConversationPath(str(store.load(ref, args.name)))
        except ConversationError as exc:
            raise UserError(str(exc)) from exc


def files_renamed(session: Session, renames: list[tuple[str, str]]) -> int:
    """`workspace/didRenameFiles` (old URI, new URI) pairs; returns how many index entries changed.

    Renames across state roots (into another repository) are not followed: the next resolve there starts
    (or finds) that root's conversation."""
    changed = 0
    for old, new in renames:
        new_path = target_path(new)
        if new_path is None:
            continue
        store = store_for(session, new_path, create=False)
        if not (store.directory / "file-index.json").exists():
            continue  # no conversations there yet: nothing to keep right
        changed += len(store.rename(old, new))
    return changed
