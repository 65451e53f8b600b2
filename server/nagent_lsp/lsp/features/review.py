"""`nagent.review.list|show|apply|discard` (DESIGN §4.1, §9), and the pending hunks of a document shown as Hint
diagnostics (the zero-plugin review; its code actions are in operations/code_actions.py): when it is opened, and
again a moment after the user stops typing in it, each hunk re-placed in the current text
(`operations.review.marks_for`). A hunk whose lines the user changed stays shown where they were, saying it no
longer applies.

Proposals this server did not make (a clone brought them) are never shown; each is reported once per server as a
window message (`operations.review.announce`, through `ReviewPort.log`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.args import NoArgs, ReviewApplyArgs, ReviewDiscardArgs, ReviewIdArgs

if TYPE_CHECKING:
    from nagent_lsp.operations.review import ProposalView, ReviewApplied, ReviewDiscarded, ReviewList

log = logging.getLogger("nagent_lsp")

SETTLE = 0.25  # seconds without a change to a document before its pending hunks are placed again


# Operations are imported when first used: start-up answers `initialize` without loading the edit loop.


class ReviewPort(LspPort):
    """The editor port of the review commands: a warning (a proposal this server did not make, ignored) is also
    shown to the user as a window message, not only logged. Used on the event loop only."""

    def log(self, level: str, message: str) -> None:
        super().log(level, message)
        if level in ("warning", "error"):
            kind = types.MessageType.Warning if level == "warning" else types.MessageType.Error
            self.server.window_show_message(types.ShowMessageParams(type=kind, message=message))


def register(server: NagentServer) -> None:
    async def run_list(ls: NagentServer, args: NoArgs) -> ReviewList:
        from nagent_lsp.operations import review

        return review.review_list(ls.session, ReviewPort(ls), args)

    async def run_show(ls: NagentServer, args: ReviewIdArgs) -> ProposalView:
        from nagent_lsp.operations import review

        return await review.review_show(ls.session, ReviewPort(ls), args)

    async def run_apply(ls: NagentServer, args: ReviewApplyArgs) -> ReviewApplied:
        from nagent_lsp.operations import review

        return await review.review_apply(ls.session, ReviewPort(ls), args)

    async def run_discard(ls: NagentServer, args: ReviewDiscardArgs) -> ReviewDiscarded:
        from nagent_lsp.operations import review

        return await review.review_discard(ls.session, ReviewPort(ls), args)

    register_command(server, "nagent.review.list", NoArgs, run_list)
    register_command(server, "nagent.review.show", ReviewIdArgs, run_show)
    register_command(server, "nagent.review.apply", ReviewApplyArgs, run_apply)
    register_command(server, "nagent.review.discard", ReviewDiscardArgs, run_discard)

    timers: dict[str, asyncio.TimerHandle] = {}

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(ls: NagentServer, params: types.DidChangeTextDocumentParams) -> None:
        """Debounced: the hunks are placed again once the user pauses (only where a proposal may be pending)."""
        uri = params.text_document.uri
        previous = timers.pop(uri, None)
        if previous is not None:
            previous.cancel()

        def settle() -> None:
            timers.pop(uri, None)
            ls.in_background(asyncio.ensure_future(show_pending(ls, uri)))

        timers[uri] = asyncio.get_running_loop().call_later(SETTLE, settle)


async def show_pending(ls: NagentServer, uri: str) -> None:
    """Publish the pending hunks of `uri`, placed in its current text (when a document opens — proposals survive
    a restart — and after the user changed it). Nothing is sent to a document that shows none and gets none."""
    from nagent_lsp.operations import review

    try:
        port = ReviewPort(ls)
        path = uri_to_path(uri)
        also = ls.session.state_root(path).path if path is not None else None
        marks = await asyncio.to_thread(review.marks_for, ls.session, port, uri)
        if marks or port.shows_review(uri):
            port.publish_review(uri, marks)
        review.announce(ls.session, port, also)  # on the loop: it may send a window message
    except Exception as exc:  # the review display is a help: never fail the didOpen or didChange
        log.info("could not show pending proposals of %s: %s", uri, exc)
