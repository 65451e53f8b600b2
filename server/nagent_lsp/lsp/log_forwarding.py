"""Warnings and errors of the "nagent_lsp" logger also go to the client as window/logMessage (set-up: core.logs).

What the editor gets is one capped message per record, never a traceback (that is for the log file at -v)."""

from __future__ import annotations

import logging

from lsprotocol import types

from nagent_lsp.core.logs import CappedFormatter
from nagent_lsp.lsp.server import NagentServer

CLIENT_MESSAGE_CHARS = 2000  # characters of one window/logMessage
_LEVELS = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning}


class ClientForwarder(logging.Handler):
    """Forwards records at WARNING and above to the client; safe to call from worker threads."""

    def __init__(self, server: NagentServer):
        super().__init__(logging.WARNING)
        self.server = server
        self.setFormatter(CappedFormatter("%(message)s", tracebacks=False, limit=CLIENT_MESSAGE_CHARS))

    def emit(self, record: logging.LogRecord) -> None:
        loop = self.server.loop
        if loop is None or loop.is_closed() or not self.server.client_ready:
            return
        kind = (
            _LEVELS.get(record.levelno, types.MessageType.Warning)
            if record.levelno < logging.ERROR
            else types.MessageType.Error
        )
        params = types.LogMessageParams(type=kind, message=self.format(record))
        try:
            loop.call_soon_threadsafe(self.server.window_log_message, params)
        except RuntimeError:
            pass


def attach_client(server: NagentServer) -> None:
    logger = logging.getLogger("nagent_lsp")
    if not any(isinstance(h, ClientForwarder) for h in logger.handlers):
        logger.addHandler(ClientForwarder(server))
