"""The file index and the per-file conversation store (DESIGN §2).

`conversations/file-index.json` keeps nagent's schema, so both tools can share conversations:

    {"by_file_id": {"<dev>:<ino>": {"file_id": "<dev>:<ino>", "path": "/abs/path", "conversation": "<name>"}}}

That index is this user's alone (absolute paths, device numbers): the state root's `.gitignore` keeps it out of
git. In a repository, the committed `manifest.json` (store/conversation_manifest.py) maps repository-relative paths
to the same conversation names, so another clone finds them (issue 28).

Resolution: the entry under the file's current id (a rename: same inode, new path → path updated), else an
entry whose path is this path (save-by-replace: new inode, same path → re-keyed), else the manifest's entry for the
file's repository-relative path, else the manifest's entry for a path git says this file was renamed from (the
`former_names` hook: the history index), else a new `{slug(stem)}-{uuid4}` conversation — in the committed folder
(and the manifest) or, with `conversation.share: "local"`, in `conversations/local/` (ignored by git). Buffers with
no file yet are keyed `"uri:<uri>"` until saved. Entries of local conversations carry `"where": "local"`.

A state root made before the manifest existed is migrated once (marked in the local index): every entry inside
the repository whose conversation is in the committed folder is added to the manifest; the local index is kept.

Every change re-reads the index under a lock (filelock on a sidecar file: other threads and other processes
wait) and writes it atomically, so concurrent resolves never lose entries.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Future, ThreadPoolExecutor

    from filelock import FileLock

from nagent_lsp.core.identity import (
    file_id_for,
    is_uri_key,
    looks_like_uri,
    new_conversation_name,
    normalise,
    uri_key,
    uri_stem,
    uri_to_path,
)
from nagent_lsp.store.atomic import atomic_write_bytes, atomic_write_text
from nagent_lsp.store.conversation_manifest import MANIFEST_NAME, ConversationManifest, Files, valid_name, valid_rel

log = logging.getLogger("nagent_lsp")

T = TypeVar("T")
INDEX_NAME = "file-index.json"
SAVED_DIR = "saved"
LOCAL_DIR = "local"  # conversations kept for this user only (`conversation.share: "local"`): ignored by git
LOCAL = "local"  # an entry's "where" when its conversation is in LOCAL_DIR
MIGRATED = "manifest_migrated"  # key of the local index document: the manifest was written from it once

Entries = dict[str, dict[str, str]]


class ConversationError(ValueError):
    """A request the store cannot satisfy (not a file, bad save name, nothing saved under that name)."""


@dataclass(frozen=True)
class ConversationRef:
    file_id: str  # "<dev>:<ino>", or "uri:<uri>" for a buffer with no file yet
    path: str  # absolute path of the file, or the URI of an untitled buffer
    conversation_path: Path

    @property
    def conversation(self) -> str:
        return self.conversation_path.name

    @property
    def untitled(self) -> bool:
        return is_uri_key(self.file_id)


class FileIndex:
    """`file-index.json`: read freely, modify only through `modify` (locked read-modify-write)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock: FileLock | None = None

    def read(self) -> Entries:
        return self._load(repair=False)[1]

    def flag(self, name: str) -> bool:
        return bool(self._load(repair=False)[0].get(name))

    def set_flag(self, name: str) -> None:
        with self._locked():
            document, entries = self._load(repair=True)
            if not document.get(name):
                document[name] = 1
                document["by_file_id"] = entries
                atomic_write_text(self.path, json.dumps(document, indent=2) + "\n")

    def modify(self, change: Callable[[Entries], T]) -> T:
        """Run `change` on freshly read entries under the lock; write back only if something changed."""
        with self._locked():
            document, entries = self._load(repair=True)
            before = json.dumps(entries, sort_keys=True)
            result = change(entries)
            if json.dumps(entries, sort_keys=True) != before or "by_file_id" not in document:
                document["by_file_id"] = entries
                atomic_write_text(self.path, json.dumps(document, indent=2) + "\n")
            return result

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One lock file per index, shared by threads (filelock keeps per-thread state) and by other processes (a
        second server, the CLI) working on the same state root. filelock is imported on first use: it costs
        ~50 ms, which read-only commands such as `history` should not pay."""
        if self._lock is None:
            from filelock import FileLock

            self._lock = FileLock(self.path.with_name(f".{self.path.name}.lock"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            yield

    def _load(self, repair: bool) -> tuple[dict[str, Any], Entries]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}, {}
        try:
            document = json.loads(raw)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            # Keep the damaged file for the user instead of overwriting it; start a fresh index.
            if repair:
                backup = self.path.with_name(f"{self.path.name}.corrupt-{uuid.uuid4()}")
                os.replace(self.path, backup)
                log.warning("file index %s is not valid JSON (%s); moved to %s", self.path, exc, backup)
            return {}, {}
        if "by_file_id" not in document:
            return {}, _from_legacy(document)
        return document, _clean(document.get("by_file_id"))


def archive_text(path: Path, text: str) -> Path:
    """Keep `text` (a conversation before a fold rewrites it) beside the file as `{name}-{uuid4}`, atomically."""
    archived = path.with_name(f"{path.name}-{uuid.uuid4()}")
    atomic_write_text(archived, text)
    return archived


def append_conversation(path: Path, data: bytes, expected_size: int, syncs: PendingSyncs | None = None) -> bool:
    """Append `data` to a conversation file and fsync it (DESIGN §11: an append costs what it appends, not a
    rewrite of the whole file). Only when the file is still exactly `expected_size` bytes, the size its writer last
    left it at: a file changed, replaced or removed meanwhile is not appended to (False; the caller rewrites it
    atomically instead). A crash mid-append can leave a partial last block, which reads back as text.

    With `syncs`, the bytes are written (in the kernel's hands: a crash of this process loses nothing) before this
    returns, and the fsync that makes them survive a power loss is handed to `syncs`, which runs it in a worker
    thread; the caller waits for `syncs` before it tells anyone the run is over (issue 29)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size != expected_size:
            return False
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if syncs is None:
            os.fsync(fd)
        else:
            syncs.hand_over(fd)
            fd = -1  # closed by the sync
        return True
    finally:
        if fd >= 0:
            os.close(fd)


class PendingSyncs:
    """The fsyncs of appends already written: each starts at once in a worker thread (one for the process, so they
    run in the order handed over) while the writer goes on, and `take` gives the futures to wait for. A failed
    fsync's future raises its OSError: the waiter then rewrites the whole file atomically."""

    def __init__(self) -> None:
        self._futures: list[Future[None]] = []

    def hand_over(self, fd: int) -> None:
        try:
            self._futures.append(_sync_pool().submit(_sync_and_close, fd))
        except RuntimeError:  # the pool is shut down (the interpreter is exiting): sync here, as before
            _sync_and_close(fd)

    def take(self) -> list[Future[None]]:
        futures, self._futures = self._futures, []
        return futures

    def wait(self) -> None:
        """Block until every fsync handed over has finished; raises the first failure."""
        for future in self.take():
            future.result()


def _sync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_sync_executor: ThreadPoolExecutor | None = None
_sync_executor_lock = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    global _sync_executor
    with _sync_executor_lock:
        if _sync_executor is None:
            from concurrent.futures import ThreadPoolExecutor  # only a run that defers its syncs pays for it

            _sync_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nagent-fsync")
        return _sync_executor


def _clean(raw: Any) -> Entries:
    entries: Entries = {}
    if not isinstance(raw, dict):
        return entries
    for key, entry in raw.items():
        if not isinstance(entry, dict):
            continue
        path, conversation = entry.get("path"), entry.get("conversation")
        if isinstance(path, str) and isinstance(conversation, str) and conversation:
            file_id = str(entry.get("file_id") or key)
            entries[str(key)] = {"file_id": file_id, "path": path, "conversation": conversation}
            if entry.get("where") == LOCAL:
                entries[str(key)]["where"] = LOCAL
    return entries


def _from_legacy(document: dict[str, Any]) -> Entries:
    # nagent's oldest index was {path: conversation}; key what still exists by file id.
    entries: Entries = {}
    for path, conversation in document.items():
        if not isinstance(conversation, str) or not conversation:
            continue
        try:
            key = file_id_for(path)
        except OSError:
            key = f"path:{path}"
        entries[key] = {"file_id": key, "path": path, "conversation": conversation}
    return entries


def _local_path(value: Path | str) -> Path | None:
    """A path from a path or a `file:` URI; None for a URI with no file behind it (untitled:...)."""
    if isinstance(value, str) and looks_like_uri(value):
        return uri_to_path(value)
    return Path(value)


def _take_path_entry(entries: Entries, path: str) -> str | None:
    """The key of the entry most recently placed at `path` (entries are moved to the end when updated)."""
    found = None
    for key, entry in entries.items():
        if entry["path"] == path:
            found = key
    return found


def _put(entries: Entries, key: str, path: str, conversation: str, where: str = "") -> dict[str, str]:
    # Re-inserting moves the entry last: the latest claim on a path wins a later by-path lookup.
    entries.pop(key, None)
    entries[key] = {"file_id": key, "path": path, "conversation": conversation}
    if where == LOCAL:
        entries[key]["where"] = LOCAL
    return entries[key]


def _moved(entries: Entries, key: str, path: str) -> dict[str, str]:
    """The entry under `key`, now at `path` (its conversation and folder kept)."""
    entry = entries[key]
    return _put(entries, key, path, entry["conversation"], entry.get("where", ""))


class ConversationStore:
    """Per-file conversations under `<state root>/conversations/`.

    `repository`: the work tree whose `.nagent/` this is (None outside git, or for a state root set by the user):
    only then is there a manifest. `share()`: the `conversation.share` setting, read at each new conversation.
    `former_names(path)`: the repository-relative paths git says the file had (renames), asked only when a file
    has no local entry, its path is not in the manifest and the manifest names a path that no longer exists."""

    def __init__(
        self,
        state_root: Path,
        repository: Path | None = None,
        share: Callable[[], str] | None = None,
        former_names: Callable[[Path], Iterable[str]] | None = None,
    ):
        self.state_root = Path(state_root)
        self.directory = self.state_root / "conversations"
        self.local_directory = self.directory / LOCAL_DIR
        self.index = FileIndex(self.directory / INDEX_NAME)
        self.repository = Path(os.path.realpath(repository)) if repository is not None else None
        self.manifest = (
            ConversationManifest(self.directory / MANIFEST_NAME, self.directory / f".{MANIFEST_NAME}.lock")
            if repository is not None
            else None
        )
        self.share = share or (lambda: "committed")
        self.former_names = former_names
        self._async_locks: dict[str, asyncio.Lock] = {}
        self._async_guard = threading.Lock()
        self._migrated = False

    # --- resolution ---------------------------------------------------------------------------

    def resolve(self, path_or_uri: Path | str) -> ConversationRef:
        """The conversation of a file (by path or `file:` URI) or of an unsaved buffer (any other URI)."""
        key, path, file_backed = self._identify(path_or_uri)
        self._check_confined()
        self._migrate_once()
        rel = self._rel(path)
        shared = self._shared_files()
        former = self._former_path(key, path, rel, shared)
        old_path = [""]

        def change(entries: Entries) -> dict[str, str]:
            entry = entries.get(key)
            if entry is not None:
                if entry["path"] != path:  # renamed: same inode, new path
                    old_path[0] = entry["path"]
                    entry = _moved(entries, key, path)
                return entry
            previous = _take_path_entry(entries, path)
            if previous is not None and file_backed:
                # Save-by-replace (same path, new inode), or the first save of a buffer keyed by its URI.
                entry = entries.pop(previous)
                return _put(entries, key, path, entry["conversation"], entry.get("where", ""))
            if previous is not None:
                return entries[previous]  # the file is gone for now (deleted, mid-replace): keep its entry
            for known in (rel, former):  # another clone's conversation: by this path, or by the path it had
                name = shared.get(known) if known else None
                if name is not None and self._shareable(name, known or ""):
                    if known == former:
                        old_path[0] = str(self.repository / former) if self.repository and former else ""
                    return _put(entries, key, path, name)
            stem = Path(path).stem if file_backed or not looks_like_uri(path) else uri_stem(path)
            where = LOCAL if self.repository is not None and self.share() == "local" else ""
            return _put(entries, key, path, new_conversation_name(stem), where)

        entry = self.index.modify(change)
        if entry.get("where") == LOCAL:
            self.local_directory.mkdir(parents=True, exist_ok=True)  # an editor may create the file itself
        self._publish(entry, old_path[0])
        return self._ref(entry)

    def refs(self) -> list[ConversationRef]:
        refs = [self._ref(entry) for entry in self.index.read().values()]
        return sorted(refs, key=lambda ref: (ref.path, ref.file_id))

    def rename(self, old: Path | str, new: Path | str) -> list[ConversationRef]:
        """`workspace/didRenameFiles`: paths (or a folder) moved from `old` to `new`; also adopts an
        untitled buffer saved as `new`. Returns the entries that changed."""
        new_local = _local_path(new)
        if new_local is None:
            raise ConversationError(f"cannot rename to a non-file URI: {new}")
        new_path = normalise(new_local)
        old_local = _local_path(old)
        old_is_uri = old_local is None
        old_path = "" if old_local is None else str(normalise(old_local))
        self._check_confined()

        def change(entries: Entries) -> list[dict[str, str]]:
            moved: list[tuple[str, str]] = []  # (key, new path)
            for key, entry in list(entries.items()):
                if old_is_uri:
                    if key == uri_key(str(old)):
                        moved.append((key, str(new_path)))
                elif entry["path"] == old_path:
                    moved.append((key, str(new_path)))
                elif entry["path"].startswith(old_path.rstrip("/") + "/"):  # a folder was renamed
                    moved.append((key, str(new_path) + entry["path"][len(old_path.rstrip("/")) :]))
            changed = []
            for key, path in moved:
                before = entries[key]
                conversation, where = before["conversation"], before.get("where", "")
                olds.append(before["path"])
                try:
                    new_key = file_id_for(path) if Path(path).is_file() else key
                except OSError:
                    new_key = key
                if new_key != key and new_key in entries and self._has_content(entries[new_key]):
                    # The new file already has a conversation with content: keep it, only fix this path.
                    new_key = key
                entries.pop(key)
                changed.append(_put(entries, new_key, path, conversation, where))
            return changed

        olds: list[str] = []
        changed = self.index.modify(change)
        for old_entry_path, entry in zip(olds, changed, strict=True):
            self._publish(entry, old_entry_path)
        return [self._ref(entry) for entry in changed]

    # --- conversation files -------------------------------------------------------------------

    def archive(self, ref: ConversationRef) -> Path | None:
        """Clear: move the conversation aside as `{name}-{uuid4}` and start an empty one.

        Returns the archive, or None when there was nothing to archive yet."""
        current = ref.conversation_path
        archived: Path | None = None
        if current.exists():
            archived = current.with_name(f"{current.name}-{uuid.uuid4()}")
            os.rename(current, archived)
        # An empty file (not a missing one) keeps an editor that shows the conversation on a real file.
        atomic_write_text(current, "")
        return archived

    def save(self, ref: ConversationRef, name: str) -> Path:
        """Copy the conversation to `saved/<name>` (replacing an older save of that name)."""
        target = self.saved_path(name)
        try:
            data = ref.conversation_path.read_bytes()
        except FileNotFoundError:
            raise ConversationError(f"no conversation yet for {ref.path}; nothing to save") from None
        atomic_write_bytes(target, data)
        return target

    def load(self, ref: ConversationRef, name: str) -> Path:
        """Replace the conversation with `saved/<name>`; the current one is archived first. Returns the
        conversation path."""
        source = self.saved_path(name)
        try:
            data = source.read_bytes()
        except FileNotFoundError:
            names = ", ".join(self.saved_names()) or "none"
            raise ConversationError(f"no saved conversation named '{name}' (saved: {names})") from None
        if ref.conversation_path.exists():
            os.rename(ref.conversation_path, ref.conversation_path.with_name(f"{ref.conversation}-{uuid.uuid4()}"))
        atomic_write_bytes(ref.conversation_path, data)
        return ref.conversation_path

    def saved_path(self, name: str) -> Path:
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
            raise ConversationError(
                f"invalid conversation name '{name}': use a plain file name (no '/', no leading '.')"
            )
        return self.directory / SAVED_DIR / name

    def saved_names(self) -> list[str]:
        folder = self.directory / SAVED_DIR
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))

    # --- serialising runs on one file ---------------------------------------------------------

    def lock_for(self, ref_or_file_id: ConversationRef | str) -> asyncio.Lock:
        """One asyncio lock per conversation: runs, clears and loads on one file take turns.

        Keyed by conversation (not file id), so a save-by-replace that re-keys the file mid-run still
        maps to the same lock. Share one store per state root so every caller sees the same locks."""
        if isinstance(ref_or_file_id, ConversationRef):
            key = ref_or_file_id.conversation
        else:
            entry = self.index.read().get(ref_or_file_id)
            key = entry["conversation"] if entry else f"id:{ref_or_file_id}"
        with self._async_guard:
            lock = self._async_locks.get(key)
            if lock is None:
                import asyncio  # only the commands that take a run lock are asynchronous

                lock = self._async_locks[key] = asyncio.Lock()
            return lock

    # --- helpers ------------------------------------------------------------------------------

    def _identify(self, path_or_uri: Path | str) -> tuple[str, str, bool]:
        """(index key, stored path, backed by a file on disk)."""
        if isinstance(path_or_uri, str) and looks_like_uri(path_or_uri):
            local = uri_to_path(path_or_uri)
            if local is None:
                return uri_key(path_or_uri), path_or_uri, False
            path_or_uri = local
        path = normalise(path_or_uri)
        if path.is_file():
            return file_id_for(path), str(path), True
        if path.exists():
            raise ConversationError(f"not a file: {path}")
        # Not on disk yet (a new file not saved): keyed by URI until it is.
        return uri_key(path.as_uri()), str(path), False

    def _ref(self, entry: dict[str, str]) -> ConversationRef:
        # Only a plain name is trusted from the index: a hand-edited entry cannot point elsewhere.
        return ConversationRef(entry["file_id"], entry["path"], self._conversation_path(entry))

    def _conversation_path(self, entry: dict[str, str]) -> Path:
        folder = self.local_directory if entry.get("where") == LOCAL else self.directory
        return folder / Path(entry["conversation"]).name

    def _has_content(self, entry: dict[str, str]) -> bool:
        try:
            return self._conversation_path(entry).stat().st_size > 0
        except OSError:
            return False

    # --- the manifest (a repository's state root only) --------------------------------------------

    def _check_confined(self) -> None:
        """A repository's `.nagent/` or `conversations/` may be a link its author committed (to ~/.ssh, to another
        checkout): nothing is written through one that leads out of the repository."""
        if self.repository is None:
            return
        real = Path(os.path.realpath(self.directory))
        if real != self.repository / self.state_root.name / self.directory.name:
            raise ConversationError(
                f"{self.directory} leads to {real}, outside {self.repository}: a link in the repository; "
                "conversations are not written through it"
            )

    def _rel(self, path: str) -> str | None:
        """`path` relative to the repository, POSIX; None outside it, for a URI, or inside `.git`/the state root."""
        if self.repository is None or looks_like_uri(path):
            return None
        try:
            rel = Path(path).relative_to(self.repository).as_posix()
        except ValueError:
            return None
        if not valid_rel(rel) or rel.split("/")[0] == self.state_root.name:
            return None
        return rel

    def _shared_files(self) -> Files:
        if self.manifest is None:
            return {}
        return self.manifest.read() or {}

    def _former_path(self, key: str, path: str, rel: str | None, shared: Files) -> str | None:
        """The manifest path this file had before git renamed it, when nothing else knows the file. Asked outside
        the index lock: git may take a moment."""
        if rel is None or rel in shared or self.former_names is None or self.repository is None:
            return None
        entries = self.index.read()
        if key in entries or _take_path_entry(entries, path) is not None:
            return None
        orphans = [r for r in shared if not os.path.lexists(self.repository / r)]
        if not orphans:
            return None  # every path the manifest names is still there: nothing was renamed to this one
        names = set(self.former_names(Path(path)))
        found = sorted(r for r in orphans if r in names)
        return found[0] if found else None

    def _shareable(self, name: str, rel: str) -> bool:
        """A manifest's conversation is used only if it is a plain file (or not there yet) directly in this
        folder: a committed link (to /etc/passwd, to another user's file) is refused, with a message."""
        target = self.directory / name
        problem = ""
        if not valid_name(name):
            problem = "is not a conversation name"
        elif target.is_symlink():
            problem = "is a symbolic link"
        elif target.exists() and not target.is_file():
            problem = "is not a regular file"
        if problem:
            log.warning(
                "%s: the conversation %s for %s %s; not followed, %s gets a new conversation",
                self.directory / MANIFEST_NAME,
                name,
                rel,
                problem,
                rel,
            )
            return False
        return True

    def _publish(self, entry: dict[str, str], old_path: str = "") -> None:
        """Keep the manifest in step with a committed conversation: add its path when missing, and move the entry
        of a path it no longer has (renamed here, or a rename git showed). Never replaces another conversation."""
        if self.manifest is None or self.repository is None or entry.get("where") == LOCAL:
            return
        rel, conversation = self._rel(entry["path"]), entry["conversation"]
        old_rel = self._rel(old_path) if old_path and old_path != entry["path"] else None
        if rel is None or not valid_name(conversation):
            return

        def stale(files: Files) -> bool:
            return bool(old_rel) and files.get(old_rel or "") == conversation and not os.path.lexists(old_path)

        def change(files: Files) -> None:
            if stale(files):
                del files[old_rel or ""]
            files.setdefault(rel, conversation)

        current = self.manifest.read()
        if current is not None and (rel not in current or stale(current)):
            self.manifest.modify(change)

    def _migrate_once(self) -> None:
        """A state root from before the manifest: its committed conversations inside the repository are added to
        the manifest, once per local index (marked in it); nothing is removed, the local index stays."""
        if self._migrated or self.manifest is None or self.repository is None:
            return
        self._migrated = True
        if not self.index.path.exists() or self.index.flag(MIGRATED):
            return
        found: Files = {}
        for entry in self.index.read().values():
            rel = self._rel(entry["path"])
            if rel is not None and entry.get("where") != LOCAL and valid_name(entry["conversation"]):
                found.setdefault(rel, entry["conversation"])
        if found and self.manifest.read() is not None:

            def change(files: Files) -> None:
                for rel, name in found.items():
                    files.setdefault(rel, name)

            self.manifest.modify(change)
            log.info("migrated %d conversation(s) of %s into %s", len(found), self.index.path, self.manifest.path)
        self.index.set_flag(MIGRATED)
