"""Result blocks the server appends after running an action.

Shapes follow nagent (``<nagent-read-result path="P">\\n{content}\\n</nagent-read-result>``,
self-closing with ``error="..."`` for failures) but attribute values are escaped, and a body
that contains its own close tag gets a ``body_chars`` frame so the block reads back whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .lexer import render_element

RESULT_KINDS = ("read", "file-read", "file-patch", "write", "replace", "shell", "tool", "conversation")
_RESULT_NAME = re.compile(r"nagent-[A-Za-z0-9_-]+-result")


def result_tag(kind: str) -> str:
    """``read`` / ``nagent-read`` / ``nagent-read-result`` -> ``nagent-read-result``."""
    if _RESULT_NAME.fullmatch(kind):
        return kind
    short = kind.removeprefix("nagent-")
    if short not in RESULT_KINDS:
        raise ValueError(f"unknown result kind: {kind!r}")
    return f"nagent-{short}-result"


def render_result(
    kind: str,
    attrs: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,
    body: str | None = None,
) -> str:
    """Render a result block; ``body=None`` gives the self-closing form (errors, write success)."""
    return render_element(result_tag(kind), attrs, body)


def _sections(exit_code: int, named: Iterable[tuple[str, str]]) -> str:
    lines = [f"exit_code: {exit_code}"]
    for label, text in named:
        text = text.rstrip("\r\n")
        if text:  # empty sections are left out, as nagent does
            lines.append(f"{label}:")
            lines.append(text)
    return "\n".join(lines)


def shell_result_body(exit_code: int, stdout: str, stderr: str) -> str:
    """``exit_code: N`` then ``stdout:``/``stderr:`` sections (each only when non-empty)."""
    return _sections(exit_code, (("stdout", stdout), ("stderr", stderr)))


def conversation_result_body(exit_code: int, output: str, stderr: str = "") -> str:
    """``exit_code: N`` then ``output:``/``stderr:`` sections (each only when non-empty)."""
    return _sections(exit_code, (("output", output), ("stderr", stderr)))
