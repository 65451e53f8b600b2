"""The language server: the one place that lists every feature module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from nagent_lsp import __version__
from nagent_lsp.lsp import logs
from nagent_lsp.operations.session import Session


class NagentProtocol(LanguageServerProtocol):
    """pygls cancels a request only before it starts; our long commands run as tasks we cancel ourselves."""

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        super()._handle_cancel_notification(msg_id)
        task = self._server.running.pop(msg_id, None)
        if task is not None and not task.done():
            task.cancel()

    def current_request_id(self) -> Any:
        return self._ctx_msg_id.get(None)


class NagentServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("nagent-lsp", __version__, protocol_cls=NagentProtocol)
        self.running: dict[Any, Any] = {}  # request id -> the asyncio task serving it
        self.session = Session()
        self.client_ready = False
        self.loop: Any = None  # the event loop serving the client, known once initialized
        self.reported_problems: set[str] = set()
        self.pending_problems: list[str] = []  # found before the client can be shown messages

    def report_server_error(self, error: Exception, source: Any) -> None:
        # A failed request already answered with its error (and was logged where it failed); other out-of-band
        # errors are logged (and so forwarded as logMessage), never popped up on every glitch.
        if isinstance(error, JsonRpcException) or source is FeatureRequestError:
            return
        logs.logging.getLogger("nagent_lsp").error("server error: %s", error)

    def folder_paths(self) -> list[Path]:
        try:
            folders = self.workspace.folders
        except RuntimeError:
            return []
        paths = [Path(to_fs_path(f.uri)) for f in folders.values() if to_fs_path(f.uri)]
        if not paths and self.workspace.root_path:
            paths = [Path(self.workspace.root_path)]
        return paths


def create_server() -> NagentServer:
    from nagent_lsp.lsp.features import codeaction, conversation, edit, history, lifecycle, splitpatch, status

    server = NagentServer()
    for feature in (lifecycle, status, edit, conversation, history, splitpatch, codeaction):
        feature.register(server)
    logs.attach_client(server)
    return server
