"""Conversations that travel with the repository, and the secrets kept out of them (issue 28, "Sharing safely").

A conversation is shared when its file lies in a git work tree and git does not ignore it (the state root's
`.gitignore` keeps `outputs/`, `proposals/`… local; a conversation in `<repo>/.nagent/conversations/` is the
user's to commit). Before the server writes into a shared conversation, what it writes is searched for secrets
(text/secrets.py: token shapes, key-like assignments, the held secret values, lines of the workspace's `denyRead`
files) and each is replaced by `[redacted: <kind>]`; the user's own request included. A conversation that stays
local is written as it is (only the API key is ever redacted there): redacting it would change what the model
reads back for nothing.

Reads only (the denyRead files, bounded); `git check-ignore` runs through history/git.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from nagent_lsp.config.settings import DEFAULT_DENY_READ
from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.secret_env import held_values
from nagent_lsp.store.conversation_attributes import ensure_attributes
from nagent_lsp.text.secrets import Finding, denied_strings, redact_secrets

log = logging.getLogger("nagent_lsp")

MAX_WALK_ENTRIES = 20_000  # directory entries looked at, at most, when looking for denyRead files
MAX_DENIED_FILES = 50
MAX_DENIED_FILE_BYTES = 256 * 1024
# Folders never searched for denyRead files: git's, the state root, and the usual dependency trees.
SKIPPED_DIRS = frozenset({".git", ".nagent", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache"})

# A walk's findings, and git's answer on a folder, serve the conversations written meanwhile (apply, review,
# sub-conversations); a `.env` or a `.gitignore` changed mid-session is seen within this time.
FRESH_SECONDS = 30.0

_shared_cache: dict[Path, tuple[float, bool]] = {}
_denied_cache: dict[tuple[Path, tuple[str, ...]], tuple[float, tuple[str, ...]]] = {}
_cache_lock = threading.Lock()


def repository_of(path: Path) -> Path | None:
    top = git_toplevel(str(path.parent))
    return Path(top) if top else None


def is_shared(conversation: Path) -> bool:
    """Whether git would pick up this conversation file: inside a work tree, not ignored. Git is asked at most
    every FRESH_SECONDS per folder; when it cannot answer, shared."""
    folder = conversation.parent
    now = time.monotonic()
    with _cache_lock:
        cached = _shared_cache.get(folder)
    if cached is not None and now - cached[0] < FRESH_SECONDS:
        return cached[1]
    top = repository_of(conversation)
    shared = top is not None and not _ignored(top, conversation)
    with _cache_lock:
        _shared_cache[folder] = (now, shared)
    return shared


def _ignored(top: Path, conversation: Path) -> bool:
    from nagent_lsp.history.git import GitError, GitRepository

    try:
        relative = conversation.resolve().relative_to(top.resolve())
    except ValueError:
        return False
    try:
        # `-v -n` prints one line per path and exits 0 either way: "::\t<path>" when no pattern matches.
        out = GitRepository(top).run(["check-ignore", "-v", "-n", "--", relative.as_posix()])
    except GitError as exc:
        log.debug("git check-ignore %s: %s", relative, exc)
        return False
    source = out.split(b"\t", 1)[0]
    return bool(out) and source != b"::" and not source.split(b":")[-1].startswith(b"!")


def denied_in(top: Path, globs: tuple[str, ...] = DEFAULT_DENY_READ) -> tuple[str, ...]:
    """`denied_strings` of the work tree's denyRead files, walked again at most every FRESH_SECONDS (a run
    opens the same conversation several times; each must not walk the repository)."""
    now = time.monotonic()
    with _cache_lock:
        cached = _denied_cache.get((top, globs))
    if cached is not None and now - cached[0] < FRESH_SECONDS:
        return cached[1]
    strings = denied_strings(denied_contents(top, globs))
    with _cache_lock:
        _denied_cache[(top, globs)] = (now, strings)
    return strings


def denied_contents(top: Path, globs: Iterable[str] = DEFAULT_DENY_READ) -> list[str]:
    """The text of the denyRead files (`.env`, `*.pem`, …) in the work tree `top`: a bounded walk (at most
    MAX_WALK_ENTRIES entries, MAX_DENIED_FILES files of at most MAX_DENIED_FILE_BYTES each; links not followed)."""
    patterns = [g.casefold() for g in globs]
    contents: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        seen += len(dirs) + len(files)
        for name in sorted(files):
            relative = Path(folder, name).relative_to(top).as_posix().casefold()
            if not any(fnmatchcase(name.casefold(), p) or fnmatchcase(relative, p) for p in patterns):
                continue
            text = _read_small(Path(folder, name))
            if text is not None:
                contents.append(text)
            if len(contents) >= MAX_DENIED_FILES:
                return contents
        if seen >= MAX_WALK_ENTRIES:
            break
    return contents


def _read_small(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_DENIED_FILE_BYTES:
            return None
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _merge_as_text(conversation: Path) -> None:
    """The first write into a shared conversation gives its folder the `.gitattributes` that lets two clones'
    appends merge (store/conversation_attributes.py); a `saved/` conversation's folder is the one above."""
    for folder in (conversation.parent, conversation.parent.parent):
        if folder.name == "conversations":
            try:
                ensure_attributes(folder)
            except OSError as exc:  # a read-only checkout: merging is a convenience, never a reason to fail a run
                log.debug("cannot write %s/.gitattributes: %s", folder, exc)
            return


class SecretGuard:
    """What one conversation file's writes pass through: finds and redacts, logs once per conversation."""

    def __init__(
        self, conversation: Path, held: Iterable[str] = (), deny_read: Iterable[str] = DEFAULT_DENY_READ
    ) -> None:
        self.conversation = conversation
        self._held = tuple(held)
        self._deny_read = tuple(deny_read)  # the session's denyRead globs (the user's additions included)
        self._denied: tuple[str, ...] | None = None
        self._shared: bool | None = None
        self._logged = False

    @property
    def shared(self) -> bool:
        if self._shared is None:
            self._shared = is_shared(self.conversation)
            if self._shared:
                _merge_as_text(self.conversation)
        return self._shared

    def prepare(self) -> None:
        """Ask git whether the conversation is shared and, when it is, read the denyRead files now: a run calls this
        in a worker thread beside its other reads, so its first write does not wait for git (issue 29)."""
        if self.shared:
            self._denied_strings()

    def _denied_strings(self) -> tuple[str, ...]:
        if self._denied is None:
            top = repository_of(self.conversation)
            self._denied = denied_in(top, self._deny_read) if top is not None else ()
        return self._denied

    def clean(self, text: str) -> str:
        """`text` with its secrets redacted when the conversation is shared; as it is otherwise."""
        if not text or not self.shared:
            return text
        cleaned, findings = redact_secrets(text, (*self._held, *held_values()), self._denied_strings())
        if findings:
            self._report(findings)
        return cleaned

    def _report(self, findings: list[Finding]) -> None:
        if self._logged:
            return
        self._logged = True
        kinds = sorted({f.kind for f in findings})
        log.warning(
            "redacted %d secret(s) (%s) before writing %s: the conversation is shared through git",
            len(findings),
            ", ".join(kinds),
            self.conversation,
        )
