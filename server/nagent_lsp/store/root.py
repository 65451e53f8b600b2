"""Creating a state root: the folder and its `.gitignore`.

What the server keeps for this user alone is ignored: `cache/` (history index, summaries), `splits/`,
`proposals/` (changes awaiting this user's review, proven by this user's MAC: useless to anyone else, and a
proposal another clone brings is ignored anyway), `outputs/` (shell output spilled from runs, which may hold
anything a command printed), `patches/` (the diffs of applied changes) and `secret` (the per-user key, when the
state root is `~/.nagent`). Conversations, agents, recipes and `config.json` are the user's data and may be
committed — but of `conversations/`, only the conversations and `manifest.json` (repository-relative path →
conversation, how a clone finds them): the file index (`file-index.json`: device:inode and absolute paths, this
machine's), the lock and temp files beside it and `conversations/local/` (`conversation.share: "local"`) are ignored.

The `.gitignore` the server writes starts with `MARKER`. A root made by an older server has the old two-line file
(`LEGACY`): both are ours, and only the lines missing from them are appended (anything the user added stays).
Any other `.gitignore` — the user's own, or one the repository ships — is left exactly as it is: the server
does not rewrite a file it did not write. A `.gitignore` that is a link is not read nor written.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from nagent_lsp.core.errors import UserError
from nagent_lsp.store.atomic import atomic_write_text
from nagent_lsp.store.files import read_regular_bytes

CACHE = "cache"  # the history index, blames and commit summaries (history/service.py)
TXN = "txn"  # change sets being applied, until they are whole (store/transaction.py)
SUMMARIES = "commit-summaries.json"  # in CACHE: the commit summaries (store/commit_summary_cache.py)
MARKER = "# Written by nagent-lsp: per-user state, not committed (nagent-lsp appends lines it needs later)."
# `secret`: where the state root is ~/.nagent (no repository), the per-user secret (store/provenance.py) sits in
# it; a dotfiles repository must not commit it.
# The per-user side of conversations (issue 28): the local index (and its corrupt-file backups), its lock and temp
# files, the manifest's lock, and the conversations kept local.
CONVERSATIONS_LOCAL = (
    "conversations/file-index.json*",
    "conversations/.file-index.json*",
    "conversations/.manifest.json.*",
    "conversations/local/",
)
# `attribution/`: the ledger of which run wrote which lines (issue 27), this user's like proposals.
IGNORED = (
    *("cache/", "splits/", "proposals/", "outputs/", "patches/", "secret", "txn/"),
    *CONVERSATIONS_LOCAL,
    "attribution/",
)
GITIGNORE = MARKER + "\n" + "".join(f"{line}\n" for line in IGNORED)
LEGACY = "cache/\nsplits/\n"  # what servers wrote before the marker
GITIGNORE_MAX_BYTES = 1 << 20

_checked: set[Path] = set()  # roots whose .gitignore was looked at by this process (once each)
_lock = threading.Lock()


def ensure_root(path: Path) -> Path:
    """Create the root on first use with its .gitignore; an existing root's own .gitignore gets the lines it
    lacks (once per process), anyone else's is left alone."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path / ".gitignore", GITIGNORE)
        with _lock:
            _checked.add(path)
        return path
    with _lock:
        if path in _checked:
            return path
        _checked.add(path)
    try:
        update_gitignore(path / ".gitignore")
    except OSError:
        pass  # a read-only checkout: the ignore file is a convenience, never a reason to fail a command
    return path


def update_gitignore(gitignore: Path) -> bool:
    """Append the missing lines to a .gitignore the server wrote; True when it was changed."""
    try:
        text = read_regular_bytes(gitignore, GITIGNORE_MAX_BYTES, follow_symlinks=False).decode("utf-8")
    except (UserError, UnicodeDecodeError):
        return False  # a link, a folder, a huge file: not ours
    except FileNotFoundError:
        return False  # the user deleted it: their choice
    if not (text.startswith(MARKER) or text == LEGACY):
        return False
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in present]
    if text == LEGACY:
        text = MARKER + "\n" + text
    elif not missing:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    mode = os.lstat(gitignore).st_mode & 0o777
    atomic_write_text(gitignore, text + "".join(f"{line}\n" for line in missing), mode)
    return True
