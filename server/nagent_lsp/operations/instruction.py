"""The zero-plugin path: a `nagent: <instruction>` comment in the file is the request.

`nagent.instruction.apply {uri, line}` runs the edit with that instruction and removes the comment line in the
same change, so any editor that can run a code action's command can use nagent without a plugin.
"""

from __future__ import annotations

import re
from typing import Any

from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.operations.args import EditArgs, InstructionArgs
from nagent_lsp.operations.edit import edit, read_text, target_path
from nagent_lsp.operations.session import Session

# Line comments of most languages, and block comments closed on the same line.
_COMMENT = re.compile(
    r"^\s*(?:#+|//+|--|;+|%+|'|rem\s|\*|/\*+|<!--|\(\*)\s*nagent:\s*(?P<instruction>.*?)\s*(?:\*+/|-->|\*\))?\s*$",
    re.IGNORECASE,
)


def instruction_at(line_text: str) -> str | None:
    match = _COMMENT.match(line_text.rstrip("\r\n"))
    if not match or not match.group("instruction"):
        return None
    return match.group("instruction")


def without_line(text: str, line_text: str) -> str:
    """`text` without its first line equal to `line_text` (the comment), or unchanged when the model removed it."""
    lines = text.splitlines(keepends=True)
    for i, candidate in enumerate(lines):
        if candidate.rstrip("\r\n") == line_text.rstrip("\r\n"):
            return "".join(lines[:i] + lines[i + 1 :])
    return text


async def apply_instruction(session: Session, port: EditorPort, args: InstructionArgs) -> dict[str, Any]:
    path = target_path(session, args.uri)
    text, _ = read_text(port, path)
    lines = text.splitlines()
    if not 0 <= args.line < len(lines) or instruction_at(lines[args.line]) is None:
        raise UserError(f"line {args.line + 1} of {path.name} holds no `nagent:` comment")
    comment = lines[args.line]
    request = (
        f"{instruction_at(comment)}\n\n(This instruction was written in the file as the comment `{comment.strip()}` "
        f"on line {args.line + 1}; that comment will be removed.)"
    )
    return await edit(
        session,
        port,
        EditArgs(uri=args.uri, request=request),
        finish=lambda staged: without_line(staged, comment),
    )
