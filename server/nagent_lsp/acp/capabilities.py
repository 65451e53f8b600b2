"""What `initialize` answers: exactly what is implemented (ACP v1) — sessions that load, list, resume, close and
delete (archive; advertised only when routed, acp.delete_route); prompts with embedded context (no image, no audio);
one auth method of type terminal (`nagent-lsp acp --setup`).
Light on purpose: `initialize` is answered before the engine is imported (`acp.entry`)."""

from __future__ import annotations

from typing import Any

from acp import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    PromptCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    TerminalAuthMethod,
)

from nagent_lsp import __version__

SETUP_METHOD = "nagent-setup"


def client_fs(client_capabilities: Any) -> tuple[bool, bool]:
    """Whether the client offers fs/read_text_file and fs/write_text_file (never called otherwise)."""
    fs = getattr(client_capabilities, "fs", None)
    return bool(getattr(fs, "read_text_file", False)), bool(getattr(fs, "write_text_file", False))


def initialize_response(delete: bool = False) -> InitializeResponse:
    """`delete`: whether session/delete is routed (acp.delete_route): advertised only then."""
    return InitializeResponse(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=True,
            prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
                close=SessionCloseCapabilities(),
                delete=SessionDeleteCapabilities() if delete else None,
            ),
        ),
        auth_methods=[
            TerminalAuthMethod(
                type="terminal",
                id=SETUP_METHOD,
                name="Set up nagent's model",
                description="Writes your model settings (~/.nagent/config.json) interactively",
                args=["acp", "--setup"],
            )
        ],
        agent_info=Implementation(name="nagent-lsp", title="nagent", version=__version__),
    )
