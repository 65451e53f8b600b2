"""`nagent.review.list|show|apply|discard` (DESIGN §4.1, §9), and the pending hunks of a document shown as Hint
diagnostics when it is opened (the zero-plugin review; its code actions are in operations/code_actions.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import NoArgs, ReviewApplyArgs, ReviewDiscardArgs, ReviewIdArgs

log = logging.getLogger("nagent_lsp")


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop.


def register(server: NagentServer) -> None:
    async def run_list(ls: NagentServer, args: NoArgs) -> dict[str, Any]:
        from nagent_lsp.operations import review

        return review.review_list(ls.session, LspPort(ls), args)

    async def run_show(ls: NagentServer, args: ReviewIdArgs) -> dict[str, Any]:
        from nagent_lsp.operations import review

        return review.review_show(ls.session, LspPort(ls), args)

    async def run_apply(ls: NagentServer, args: ReviewApplyArgs) -> dict[str, Any]:
        from nagent_lsp.operations import review

        return await review.review_apply(ls.session, LspPort(ls), args)

    async def run_discard(ls: NagentServer, args: ReviewDiscardArgs) -> dict[str, Any]:
        from nagent_lsp.operations import review

        return await review.review_discard(ls.session, LspPort(ls), args)

    register_command(server, "nagent.review.list", NoArgs, run_list)
    register_command(server, "nagent.review.show", ReviewIdArgs, run_show)
    register_command(server, "nagent.review.apply", ReviewApplyArgs, run_apply)
    register_command(server, "nagent.review.discard", ReviewDiscardArgs, run_discard)


async def show_pending(ls: NagentServer, uri: str) -> None:
    """Publish the pending hunks of `uri` (called when a document opens: proposals survive a restart)."""
    from nagent_lsp.operations import review

    try:
        port = LspPort(ls)
        marks = await asyncio.to_thread(review.marks_for, ls.session, port, uri)
        if marks:
            port.publish_review(uri, marks)
    except Exception as exc:  # the review display is a help: never fail the didOpen
        log.info("could not show pending proposals of %s: %s", uri, exc)
