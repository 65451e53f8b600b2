"""`nagent-lsp conversations check [PATH] [--fix]`: secrets in the conversations a repository would share.

Every conversation under the state root of PATH (default: the current folder) is searched the way the server
searches what it writes into a shared conversation (text/secrets.py): token shapes, key-like assignments, the
secret values this process holds (the API key), lines of the workspace's `denyRead` files. Each finding is printed
as `FILE:LINE: KIND`, never the secret itself. Exit 1 when anything is found; with `--fix` each file is rewritten
atomically with the secrets redacted (`[redacted: KIND]`), and the exit is 0 once nothing is left.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nagent_lsp.core.errors import UserError

MAX_FILES = 10_000  # conversation files looked at, at most
MAX_FILE_BYTES = 64 * 1024 * 1024


def run(args: argparse.Namespace) -> int:
    from nagent_lsp.headless.common import run_guarded

    found: list[int] = []
    code = run_guarded(lambda: found.append(check((args.path or Path.cwd()).resolve(), fix=args.fix)))
    return 1 if code == 0 and found and found[0] else code


def check(path: Path, fix: bool = False) -> int:
    """Print the findings; return how many are left (0 after a successful --fix)."""
    from nagent_lsp.agent.shared_conversations import denied_contents, repository_of
    from nagent_lsp.core.secret_env import held_values
    from nagent_lsp.headless.common import session_for
    from nagent_lsp.text.secrets import denied_strings, find_secrets, redact

    if not path.exists():
        raise UserError(f"no such file or folder: {path}")
    session = session_for(path)
    root = session.state_root(path).path
    directory = root / "conversations"
    top = repository_of(directory / "x") or session.workspace_folders[0]
    held = (*held_values(), *filter(None, [session.api_key()]))
    denied = denied_strings(denied_contents(top, session.settings.denyRead))
    left = 0
    files = 0
    for conversation in conversation_files(directory):
        files += 1
        data = conversation.read_bytes()
        text = data.decode("utf-8", "surrogateescape")
        findings = find_secrets(text, held, denied)
        if not findings:
            continue
        shown = _shown(conversation)
        for finding in findings:
            print(f"{shown}:{finding.line}: {finding.kind}{' (redacted)' if fix else ''}")
        if fix:
            _rewrite(conversation, data, redact(text, findings).encode("utf-8", "surrogateescape"))
        else:
            left += len(findings)
    total = "no secrets" if not left else f"{left} secret(s)"
    print(f"{files} conversation file(s) in {directory}: {total}{' left' if fix else ''}", file=sys.stderr)
    return left


def conversation_files(directory: Path) -> Iterator[Path]:
    """The conversations (current, archived, saved) under `directory`: regular files, not the JSON index or
    manifest, not dot files (`.gitattributes`, locks, temp files); links are not followed."""
    count = 0
    for folder, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(folder, name)
            if name.startswith(".") or ".json" in name or path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                print(f"warning: {path} is larger than {MAX_FILE_BYTES} bytes: not checked", file=sys.stderr)
                continue
            count += 1
            if count > MAX_FILES:
                print(f"warning: more than {MAX_FILES} conversation files: the rest are not checked", file=sys.stderr)
                return
            yield path


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def _rewrite(path: Path, before: bytes, after: bytes) -> None:
    from nagent_lsp.store.atomic import atomic_write_bytes

    if path.read_bytes() != before:  # the server appended meanwhile: check again rather than lose its turn
        raise UserError(f"{path} changed while it was checked; run the check again")
    atomic_write_bytes(path, after)
