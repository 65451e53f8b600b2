"""`nagent.conversation.open|list|clear|save|load` and `workspace/didRenameFiles`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import CompactArgs, NamedArgs, NoArgs, SendArgs, UriArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.conversation import (
        ArchivedConversation,
        ConversationList,
        ConversationPath,
        OpenedConversation,
    )
    from nagent_lsp.operations.conversation_summary import CompactedConversation, ConversationSummary
    from nagent_lsp.operations.edit import EditResult

log = logging.getLogger("nagent_lsp")


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop,
# git or the model SDK (benchmarks/startup.py measures it).


def register(server: NagentServer) -> None:
    async def run_open(ls: NagentServer, args: UriArgs) -> OpenedConversation:
        from nagent_lsp.operations import conversation

        return await conversation.open_conversation(ls.session, LspPort(ls), args)

    def run_list(ls: NagentServer, args: NoArgs) -> ConversationList:
        from nagent_lsp.operations import conversation

        return conversation.list_conversations(ls.session)

    async def run_clear(ls: NagentServer, args: UriArgs) -> ArchivedConversation:
        from nagent_lsp.operations import conversation

        return await conversation.clear_conversation(ls.session, args)

    def run_save(ls: NagentServer, args: NamedArgs) -> ConversationPath:
        from nagent_lsp.operations import conversation

        return conversation.save_conversation(ls.session, args)

    async def run_load(ls: NagentServer, args: NamedArgs) -> ConversationPath:
        from nagent_lsp.operations import conversation

        return await conversation.load_conversation(ls.session, args)

    async def run_summarize(ls: NagentServer, args: UriArgs) -> ConversationSummary:
        from nagent_lsp.operations import conversation_summary

        return await conversation_summary.summarize_conversation(ls.session, LspPort(ls), args)

    async def run_compact(ls: NagentServer, args: CompactArgs) -> CompactedConversation:
        from nagent_lsp.operations import conversation_summary

        return await conversation_summary.compact_conversation(ls.session, LspPort(ls), args)

    async def run_send(ls: NagentServer, args: SendArgs) -> EditResult:
        from nagent_lsp.operations.conversation_send import send

        return await send(ls.session, LspPort(ls), args)

    register_command(server, "nagent.conversation.send", SendArgs, run_send)
    register_command(server, "nagent.conversation.summarize", UriArgs, run_summarize)
    register_command(server, "nagent.conversation.compact", CompactArgs, run_compact)
    register_command(server, "nagent.conversation.open", UriArgs, run_open)
    register_command(server, "nagent.conversation.list", NoArgs, run_list)
    register_command(server, "nagent.conversation.clear", UriArgs, run_clear)
    register_command(server, "nagent.conversation.save", NamedArgs, run_save)
    register_command(server, "nagent.conversation.load", NamedArgs, run_load)

    every_file = types.FileOperationFilter(pattern=types.FileOperationPattern(glob="**/*"))

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, types.FileOperationRegistrationOptions(filters=[every_file]))
    def on_did_rename_files(ls: NagentServer, params: types.RenameFilesParams) -> None:
        # Synchronous on purpose: a small index update, done before the client's next request is handled.
        from nagent_lsp.operations import conversation

        pairs = [(f.old_uri, f.new_uri) for f in params.files]
        try:
            changed = conversation.files_renamed(ls.session, pairs)
        except Exception:  # noqa: BLE001 - a notification has nowhere to report to but the log
            log.exception("didRenameFiles failed for %s", pairs)
            return
        if changed:
            log.info("rename tracking: %d conversation(s) follow their files", changed)
