"""The user's trust in a repository's nagent definitions (DESIGN §12), as direnv does: by content hash.

A state root's definitions are its `config.json`, `context.md|yaml|yml` and every file under `agents/` and
`recipes/`. Their hash (sha256 over each file's path relative to the state root and its content, sorted by path)
is what the user trusts; the record lives in the user's own state, `~/.nagent/trust.json` (mode 0600):
`{"<state root>": {"hash": "<hex>", "trustedAt": "<ISO 8601>"}}`, keyed by the state root's real path. Any change
to a definition changes the hash, so the record no longer matches: trust is revoked by the change itself.

Reading is bounded (files, bytes per file, depth) and never leaves the state root: a symbolic link whose target
lies outside it is not followed and counts as its link text, so a link to a file the repository does not hold
cannot change behind the hash. A file too large or too many files make the definitions untrustable (`problem`).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs

from nagent_lsp.store.atomic import atomic_write_bytes
from nagent_lsp.store.files import FileTooLarge, NotRegularFile, read_regular_bytes

TRUST_FILE = "trust.json"
LOCK_FILE = ".trust.lock"
TOP_FILES = ("config.json", "context.md", "context.yaml", "context.yml")
TOP_DIRS = ("agents", "recipes")
MAX_DEFINITION_BYTES = 4 * 1024 * 1024  # per file; the loaders refuse far smaller files (256 KiB agents/recipes)
MAX_DEFINITION_FILES = 2000
MAX_DEPTH = 8
MAX_TRUST_FILE_BYTES = 16 * 1024 * 1024

_lock = threading.Lock()  # one writer per process; the lock file orders processes (the CLI and a server)


@attrs.frozen
class DefinitionFile:
    path: str  # relative to the state root, with "/" separators
    kind: str  # "file", "symlink" (a link out of the state root: its text), "special" (a FIFO, a device…)
    content: bytes


@attrs.frozen
class Definitions:
    """What the hash of a state root covers; `hash` None when it holds no definitions."""

    state_root: Path  # the real path
    files: tuple[DefinitionFile, ...]
    hash: str | None
    problem: str | None = None  # set: these definitions cannot be trusted (too large, too many files)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def content_of(self, path: Path) -> bytes | None:
        """The bytes the hash covered for the file at `path` (None: not one of the regular files hashed)."""
        try:
            relative = Path(os.path.realpath(path.parent), path.name).relative_to(self.state_root).as_posix()
        except ValueError:
            return None
        for entry in self.files:
            if entry.path == relative and entry.kind == "file":
                return entry.content
        return None


@attrs.frozen
class TrustRecord:
    hash: str
    trustedAt: str


def read_definitions(state_root: Path) -> Definitions:
    root = Path(os.path.realpath(state_root))
    files: list[DefinitionFile] = []
    problems: list[str] = []
    for name in TOP_FILES:
        _collect(root, root / name, files, problems, 0)
    for name in TOP_DIRS:
        _collect(root, root / name, files, problems, 0)
    files.sort(key=lambda f: f.path)
    if len(files) > MAX_DEFINITION_FILES:
        problems.append(f"more than {MAX_DEFINITION_FILES} files under agents/ and recipes/")
        files = files[:MAX_DEFINITION_FILES]
    return Definitions(root, tuple(files), _digest(files) if files else None, problems[0] if problems else None)


def _collect(root: Path, path: Path, files: list[DefinitionFile], problems: list[str], depth: int) -> None:  # noqa: C901, PLR0912  2026-11-27: each kind of directory entry (link, file, folder, other) bounded in place
    if len(files) > MAX_DEFINITION_FILES:
        return
    relative = path.relative_to(root).as_posix()
    try:
        info = os.lstat(path)
    except OSError:
        return  # absent: nothing to cover
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            return
        real = os.path.realpath(path)
        if not _inside(real, root):
            files.append(DefinitionFile(relative, "symlink", os.fsencode(target)))
            return
        try:
            info = os.stat(path)
        except OSError:  # a dangling link inside the root: its text is what there is
            files.append(DefinitionFile(relative, "symlink", os.fsencode(target)))
            return
    if stat.S_ISDIR(info.st_mode):
        if depth >= MAX_DEPTH:
            problems.append(f"{relative}: folders nested deeper than {MAX_DEPTH}")
            return
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            problems.append(f"{relative}: cannot be listed ({exc.strerror or exc})")
            return
        for name in names:
            _collect(root, path / name, files, problems, depth + 1)
        return
    if not stat.S_ISREG(info.st_mode):
        files.append(DefinitionFile(relative, "special", b""))
        return
    try:
        content = read_regular_bytes(path, MAX_DEFINITION_BYTES)
    except FileTooLarge as exc:
        problems.append(f"{relative} is larger than {MAX_DEFINITION_BYTES} bytes")
        content = f"too large: {exc.size}".encode()
    except NotRegularFile:
        files.append(DefinitionFile(relative, "special", b""))
        return
    except OSError as exc:
        problems.append(f"{relative} cannot be read ({exc.strerror or exc})")
        content = b""
    files.append(DefinitionFile(relative, "file", content))


def _inside(real: str, root: Path) -> bool:
    return real == str(root) or real.startswith(str(root) + os.sep)


def _digest(files: list[DefinitionFile]) -> str:
    """Length-prefixed fields, so no two different sets of files can give the same stream."""
    digest = hashlib.sha256(b"nagent-definitions-v1\0")
    for entry in files:
        for field in (entry.path.encode("utf-8", "surrogateescape"), entry.kind.encode(), entry.content):
            digest.update(len(field).to_bytes(8, "big"))
            digest.update(field)
    return digest.hexdigest()


class TrustRecords:
    """`~/.nagent/trust.json`: the state roots the user trusts and the hash each was trusted at."""

    def __init__(self, home_root: Path):
        self.path = home_root / TRUST_FILE
        self.lock_path = home_root / LOCK_FILE

    def load(self) -> dict[str, TrustRecord]:
        """Every record; a missing file is none, a malformed entry (or file) is skipped: nothing is trusted by it."""
        try:
            raw = read_regular_bytes(self.path, MAX_TRUST_FILE_BYTES, follow_symlinks=False)
            data = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError):  # FileNotFoundError, not UTF-8 or JSON, too large, a link
            return {}
        if not isinstance(data, dict):
            return {}
        records: dict[str, TrustRecord] = {}
        for root, entry in data.items():
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("hash"), str)
                and isinstance(entry.get("trustedAt"), str)
            ):
                records[root] = TrustRecord(entry["hash"], entry["trustedAt"])
        return records

    def get(self, state_root: Path) -> TrustRecord | None:
        return self.load().get(key_of(state_root))

    def record(self, state_root: Path, digest: str) -> TrustRecord:
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        record = TrustRecord(digest, now)
        with self._locked():
            records = self.load()
            records[key_of(state_root)] = record
            self._save(records)
        return record

    def revoke(self, state_root: Path) -> bool:
        """Forget the record; False when there was none."""
        with self._locked():
            records = self.load()
            if records.pop(key_of(state_root), None) is None:
                return False
            self._save(records)
        return True

    def _save(self, records: dict[str, TrustRecord]) -> None:
        data = {root: attrs.asdict(record) for root, record in sorted(records.items())}
        atomic_write_bytes(self.path, (json.dumps(data, indent=2) + "\n").encode("utf-8"), mode=0o600)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _lock:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)


def key_of(state_root: Path) -> str:
    return os.path.realpath(state_root)
