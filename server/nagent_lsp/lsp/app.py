"""The one place that lists every feature module: a server with all of them registered."""

from __future__ import annotations

from nagent_lsp.lsp import log_forwarding
from nagent_lsp.lsp.features import (
    agents,
    attribution,
    codeaction,
    conversation,
    coupling,
    edit,
    history,
    lifecycle,
    review,
    splitpatch,
    status,
)
from nagent_lsp.lsp.server import NagentServer


def create_server() -> NagentServer:
    server = NagentServer()
    features = [lifecycle, status, edit, conversation, history, splitpatch, codeaction, agents, review, attribution]
    features.append(coupling)  # last: it wraps the commands the others registered
    for feature in features:
        feature.register(server)
    log_forwarding.attach_client(server)
    return server
