"""Reading what the client can do; every server→client request is gated on these."""

from __future__ import annotations

from typing import Any

from lsprotocol.types import ClientCapabilities


def _get(obj: object, *path: str) -> Any:  # a walk through optional attributes
    for name in path:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def can_pull_configuration(caps: ClientCapabilities | None) -> bool:
    return bool(_get(caps, "workspace", "configuration"))


def can_show_document(caps: ClientCapabilities | None) -> bool:
    return bool(_get(caps, "window", "show_document", "support"))


def can_ask(caps: ClientCapabilities | None) -> bool:
    # eglot 1.9 and lsp-mode answer showMessageRequest but do not advertise it; we only ask clients that say so.
    return _get(caps, "window", "show_message") is not None


def can_show_progress(caps: ClientCapabilities | None) -> bool:
    return bool(_get(caps, "window", "work_done_progress"))


def supports_document_changes(caps: ClientCapabilities | None) -> bool:
    return bool(_get(caps, "workspace", "workspace_edit", "document_changes"))


def supports_change_annotations(caps: ClientCapabilities | None) -> bool:
    return _get(caps, "workspace", "workspace_edit", "change_annotation_support") is not None


def supports_apply_edit(caps: ClientCapabilities | None) -> bool:
    return bool(_get(caps, "workspace", "apply_edit"))


def supports_create(caps: ClientCapabilities | None) -> bool:
    """`CreateFile` in documentChanges (`workspace.workspaceEdit.resourceOperations` holds "create")."""
    operations = _get(caps, "workspace", "workspace_edit", "resource_operations") or []
    return any(getattr(op, "value", op) == "create" for op in operations)


def wants_stream(caps: ClientCapabilities | None) -> bool:
    """`experimental: {nagent: {stream: true}}`: the client renders `nagent/stream` answer deltas (issue 23)."""
    experimental = _get(caps, "experimental")
    nagent = experimental.get("nagent") if isinstance(experimental, dict) else None
    return isinstance(nagent, dict) and nagent.get("stream") is True
