"""The committed manifest: repository-relative path → conversation name (issue 28, the portable identity).

`<repo>/.nagent/conversations/manifest.json` travels with the repository, beside the conversations it names:

    {"version": 1, "files": {"src/calc.py": "calc-5b8d…"}}

Paths are POSIX and relative to the repository's work tree; entries are written sorted, one a line, so two clones
adding files merge as separate lines. The local index (`file-index.json`: device:inode and absolute paths, per
user, ignored by git) stays the first answer; the manifest is how another clone finds the same conversation.

A manifest comes from whoever committed it: it is parsed strictly, and a file that is not exactly this shape (a
path with `..`, an absolute one, a name with a `/`, a link instead of a file, ...) is reported once, naming it, and
then ignored — read as empty and never written over, so the user can look at it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from nagent_lsp.core.errors import UserError
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.files import read_regular_bytes

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger("nagent_lsp")

T = TypeVar("T")
MANIFEST_NAME = "manifest.json"
VERSION = 1
MAX_BYTES = 8 << 20
MAX_PATH_CHARS = 4096
# What the server names conversations (`<slug>-<uuid4>`, nagent's `name.md`): a plain file name, nothing else.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# Names of the conversations folder's own files and folders: a manifest entry naming one is not a conversation.
RESERVED = frozenset({MANIFEST_NAME, "file-index.json", "local", "saved"})

Files = dict[str, str]


class ManifestError(ValueError):
    """The manifest is not a manifest; the message names the file and what is wrong."""


def valid_rel(rel: object) -> bool:
    """A repository-relative POSIX path: no leading `/`, no `.`/`..`/empty part, not inside `.git`."""
    if not isinstance(rel, str) or not rel or len(rel) > MAX_PATH_CHARS or "\\" in rel or "\0" in rel:
        return False
    parts = rel.split("/")
    return not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts) and parts[0] != ".git"


def valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME.fullmatch(name) is not None and name not in RESERVED


def parse(data: bytes, where: Path) -> Files:
    """The manifest's entries, or ManifestError naming `where` and the first thing wrong."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(document, dict) or set(document) != {"version", "files"}:
        raise ManifestError(f"{where}: expected an object with exactly 'version' and 'files'")
    if document["version"] != VERSION:
        raise ManifestError(f"{where}: unsupported version {document['version']!r} (this server reads {VERSION})")
    files = document["files"]
    if not isinstance(files, dict):
        raise ManifestError(f"{where}: 'files' is not an object")
    for rel, name in files.items():
        if not valid_rel(rel):
            raise ManifestError(f"{where}: {str(rel)[:200]!r} is not a path relative to the repository")
        if not valid_name(name):
            raise ManifestError(f"{where}: {str(name)[:200]!r} (for {rel}) is not a conversation name")
    return dict(files)


def render(files: Files) -> str:
    return json.dumps({"version": VERSION, "files": dict(sorted(files.items()))}, indent=2, ensure_ascii=False) + "\n"


class ConversationManifest:
    """`manifest.json`: read freely; change only through `modify` (locked read-modify-write, atomic write).

    The lock file lives beside the local index (ignored by git), not beside the manifest."""

    def __init__(self, path: Path, lock_path: Path):
        self.path = Path(path)
        self.lock_path = Path(lock_path)
        self._lock: FileLock | None = None
        self._reported: set[tuple[int, int, str]] = set()  # (mtime_ns, size, message): each problem said once

    def read(self) -> Files | None:
        """The entries ({} when there is no manifest), or None when the file is refused (reported once)."""
        try:
            data = read_regular_bytes(self.path, MAX_BYTES, follow_symlinks=False)
        except FileNotFoundError:
            return {}
        except (UserError, OSError) as exc:
            self._report(f"{self.path}: refused ({exc}); conversations are not shared through it")
            return None
        try:
            return parse(data, self.path)
        except ManifestError as exc:
            self._report(f"{exc}; the manifest is ignored until it is fixed")
            return None

    def modify(self, change: Callable[[Files], T]) -> T:
        """Run `change` on the current entries under the lock; write back only if something changed. A refused
        manifest is given to `change` as {} and never written over."""
        with self.locked():
            current = self.read()
            files = dict(current or {})
            result = change(files)
            if current is not None and files != current:
                atomic_write_text(self.path, render(files))
            return result

    @contextmanager
    def locked(self) -> Iterator[None]:
        if self._lock is None:
            from filelock import FileLock  # ~50 ms: only the commands that change the manifest pay it

            self._lock = FileLock(self.lock_path)
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            yield

    def _report(self, message: str) -> None:
        try:
            st = self.path.lstat()
            key = (st.st_mtime_ns, st.st_size, message)
        except OSError:
            key = (0, 0, message)
        if key not in self._reported:
            self._reported.add(key)
            log.warning("%s", message)
