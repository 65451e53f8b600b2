"""Deciding what text a change should leave in a buffer that may have moved on since the run began.

Shared by every port: the editor port sends the result as edits, the disk port writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from nagent_lsp.text.edits import merge3


@dataclass(frozen=True)
class Plan:
    target: str | None  # None: nothing to apply (see reason)
    reason: str | None = None


def plan_change(base_text: str, current_text: str, new_text: str) -> Plan:
    """Three-way: the model changed base→new while the user changed base→current."""
    if current_text == base_text:
        target = new_text
    else:
        target = merge3(base_text, current_text, new_text)
        if target is None:
            return Plan(None, "conflict: the buffer changed while the model worked and both touched the same lines; nothing was applied")
    if target == current_text:
        return Plan(None, "no change")
    return Plan(target)
