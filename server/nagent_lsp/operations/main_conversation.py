"""The workspace's main conversation (issue 24): a conversation with no target file, one per workspace folder.

It lives beside the per-file conversations, as `conversations/_main` of the folder's state root (a per-file name is
always `{slug}-{uuid4}`, so it cannot collide), and is not in the file index: its identity is the folder's, so its
session id (`main:<dev>:<ino>` of the folder) is stable across restarts. A run in it reads through the same
confinement and writes through the workspace write policy (agent.write_policy, `EditSession.main`).
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.core.errors import UserError
from nagent_lsp.core.identity import file_id_for
from nagent_lsp.operations.conversation import store_for
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationRef

MAIN_NAME = "_main"
MAIN_PREFIX = "main:"


def main_folder(session: Session, cwd: Path | None = None) -> Path:
    """The workspace folder whose main conversation a request without a file joins: the one holding `cwd`."""
    folders = list(session.workspace_folders)
    if not folders:
        raise UserError("no workspace folder is open: the main conversation belongs to a workspace folder")
    if cwd is not None:
        for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
            if Path(cwd).resolve().is_relative_to(folder.resolve()):
                return folder
    return folders[0]


def main_ref(session: Session, folder: Path, create: bool = True) -> ConversationRef:
    """The main conversation of `folder` (its file may not exist yet)."""
    store = store_for(session, folder, create=create)
    try:
        folder_id = file_id_for(folder)
    except OSError as exc:
        raise UserError(f"workspace folder {folder} cannot be examined ({exc.strerror or exc})") from None
    return ConversationRef(MAIN_PREFIX + folder_id, str(folder), store.directory / MAIN_NAME)


def is_main(ref: ConversationRef) -> bool:
    return ref.file_id.startswith(MAIN_PREFIX)
