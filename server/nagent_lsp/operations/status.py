"""`nagent.status`: what the server is running with (never the API key itself)."""

from __future__ import annotations

from typing import Any

from nagent_lsp import __version__
from nagent_lsp.llm.openai_chat import strip_userinfo
from nagent_lsp.operations.session import Session


def status(session: Session) -> dict[str, Any]:
    s = session.settings
    return {
        "version": __version__,
        "stateRoot": str(session.state_root().path),
        "model": s.model,
        "baseUrl": strip_userinfo(s.baseUrl) if s.baseUrl else None,
        "modelConfigured": s.model_configured(session.environ),
        "apiKeyEnv": s.apiKeyEnv,
        "configSources": list(session.config_sources),
        "workspaceFolders": [str(p) for p in session.workspace_folders],
        "settings": {**s.public(), "baseUrl": strip_userinfo(s.baseUrl) if s.baseUrl else None},
    }
