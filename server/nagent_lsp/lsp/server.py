"""The language server class: its state (the session, running requests, problems waiting for the client) and
cancellation.

Features register themselves on it (lsp/features/*); `lsp/app.py` builds one with every feature.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from nagent_lsp import __version__
from nagent_lsp.operations.session import Session


class NagentProtocol(LanguageServerProtocol):
    """pygls cancels a request only before it starts; our long commands run as tasks we cancel ourselves."""

    def _handle_cancel_notification(self, msg_id: int | str) -> None:
        super()._handle_cancel_notification(msg_id)
        task = self._server.running.pop(msg_id, None) if isinstance(self._server, NagentServer) else None
        if task is not None and not task.done():
            task.cancel()


class NagentServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("nagent-lsp", __version__, protocol_cls=NagentProtocol)
        self.running: dict[int | str, asyncio.Task[Any] | None] = {}  # request id -> the asyncio task serving it
        self.session = Session()
        self.client_ready = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop serving the client, once initialized
        self.pending_problems: list[str] = []  # found before the client can be shown messages

    def report_server_error(self, error: Exception, source: Any) -> None:
        # A failed request already answered with its error (and was logged where it failed); other out-of-band
        # errors are logged (and so forwarded as logMessage), never popped up on every glitch.
        if isinstance(error, JsonRpcException) or source is FeatureRequestError:
            return
        logging.getLogger("nagent_lsp").error("server error: %s", error)

    def folder_paths(self) -> list[Path]:
        try:
            folders = self.workspace.folders
        except RuntimeError:
            return []
        paths = [Path(path) for f in folders.values() if (path := to_fs_path(f.uri))]
        if not paths and self.workspace.root_path:
            paths = [Path(self.workspace.root_path)]
        return paths
