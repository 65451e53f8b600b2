"""`nagent.conversation.open|list|clear|save|load` and `workspace/didRenameFiles`."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.operations import conversation, conversation_summary

log = logging.getLogger("nagent_lsp")


def register(server: Any) -> None:
    async def run_open(ls: Any, raw: Any) -> dict[str, Any]:
        return await conversation.open_conversation(ls.session, LspPort(ls), raw)

    def run_list(ls: Any, raw: Any) -> dict[str, Any]:
        return conversation.list_conversations(ls.session, raw)

    async def run_clear(ls: Any, raw: Any) -> dict[str, Any]:
        return await conversation.clear_conversation(ls.session, raw)

    def run_save(ls: Any, raw: Any) -> dict[str, Any]:
        return conversation.save_conversation(ls.session, raw)

    async def run_load(ls: Any, raw: Any) -> dict[str, Any]:
        return await conversation.load_conversation(ls.session, raw)

    async def run_summarize(ls: Any, raw: Any) -> dict[str, Any]:
        return await conversation_summary.summarize_conversation(ls.session, LspPort(ls), raw)

    async def run_compact(ls: Any, raw: Any) -> dict[str, Any]:
        return await conversation_summary.compact_conversation(ls.session, LspPort(ls), raw)

    register_command(server, "nagent.conversation.summarize", run_summarize)
    register_command(server, "nagent.conversation.compact", run_compact)
    register_command(server, "nagent.conversation.open", run_open)
    register_command(server, "nagent.conversation.list", run_list)
    register_command(server, "nagent.conversation.clear", run_clear)
    register_command(server, "nagent.conversation.save", run_save)
    register_command(server, "nagent.conversation.load", run_load)

    every_file = types.FileOperationFilter(pattern=types.FileOperationPattern(glob="**/*"))

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, types.FileOperationRegistrationOptions(filters=[every_file]))
    def on_did_rename_files(ls: Any, params: types.RenameFilesParams) -> None:
        # Synchronous on purpose: a small index update, done before the client's next request is handled.
        pairs = [(f.old_uri, f.new_uri) for f in params.files]
        try:
            changed = conversation.files_renamed(ls.session, pairs)
        except Exception:  # noqa: BLE001 - a notification has nowhere to report to but the log
            log.exception("didRenameFiles failed for %s", pairs)
            return
        if changed:
            log.info("rename tracking: %d conversation(s) follow their files", changed)
