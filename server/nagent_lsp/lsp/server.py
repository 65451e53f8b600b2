"""The language server: the one place that lists every feature module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from nagent_lsp import __version__
from nagent_lsp.lsp import logs
from nagent_lsp.workflows.session import Session


class NagentServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("nagent-lsp", __version__)
        self.session = Session()
        self.client_ready = False
        self.reported_problems: set[str] = set()
        self.pending_problems: list[str] = []  # found before the client can be shown messages

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Out-of-band errors are logged (and forwarded as logMessage), not popped up on every glitch.
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
    from nagent_lsp.lsp.features import lifecycle, status

    server = NagentServer()
    for feature in (lifecycle, status):
        feature.register(server)
    logs.attach_client(server)
    return server
