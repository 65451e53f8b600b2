"""The zero-plugin path: a `nagent: <instruction>` comment in the file is the request.

`nagent.instruction.apply {uri, line}` runs the edit with that instruction and removes the comment line in the
same change, so any editor that can run a code action's command can use nagent without a plugin.
`nagent(AGENT): instruction` runs it with that agent (DESIGN §10; an agent that may not write leaves the comment),
`nagent[RECIPE]: request` runs that recipe with the request (its comment goes only with a `fileText` it delivers).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.operations.args import EditArgs, InstructionArgs, RecipeArgs
from nagent_lsp.operations.deliver import RunResult
from nagent_lsp.operations.edit import edit, read_text, target_path
from nagent_lsp.operations.session import Session

# Line comments of most languages, and block comments closed on the same line.
_COMMENT = re.compile(
    r"^\s*(?:#+|//+|--|;+|%+|'|rem\s|\*|/\*+|<!--|\(\*)\s*nagent"
    r"(?:\((?P<agent>[A-Za-z0-9_.-]+)\)|\[(?P<recipe>[A-Za-z0-9_.-]+)\])?"
    r":\s*(?P<instruction>.*?)\s*(?:\*+/|-->|\*\))?\s*$",
    re.IGNORECASE,
)


class Comment(NamedTuple):
    instruction: str  # for a recipe: its request (may be empty)
    agent: str | None = None
    recipe: str | None = None


def comment_at(line_text: str) -> Comment | None:
    """The `nagent:` / `nagent(AGENT):` / `nagent[RECIPE]:` comment on a line, if any."""
    match = _COMMENT.match(line_text.rstrip("\r\n"))
    if not match:
        return None
    recipe = match.group("recipe")
    if not match.group("instruction") and not recipe:
        return None
    return Comment(match.group("instruction"), match.group("agent"), recipe)


def instruction_at(line_text: str) -> str | None:
    found = comment_at(line_text)
    return found.instruction if found is not None and found.recipe is None else None


def without_line(text: str, line_text: str) -> str:
    """`text` without its first line equal to `line_text` (the comment), or unchanged when the model removed it."""
    lines = text.splitlines(keepends=True)
    for i, candidate in enumerate(lines):
        if candidate.rstrip("\r\n") == line_text.rstrip("\r\n"):
            return "".join(lines[:i] + lines[i + 1 :])
    return text


async def apply_instruction(session: Session, port: EditorPort, args: InstructionArgs) -> RunResult:
    """As `nagent.edit` (an `EditResult`); a `nagent[RECIPE]:` comment runs the recipe (a `RecipeResult`)."""
    path = target_path(session, args.uri)
    text, _ = read_text(port, path)
    lines = text.splitlines()
    found = comment_at(lines[args.line]) if 0 <= args.line < len(lines) else None
    if found is None:
        raise UserError(f"line {args.line + 1} of {path.name} holds no `nagent:` comment")
    comment = lines[args.line]
    if found.recipe is not None:
        from nagent_lsp.operations.recipes import run_recipe_command

        recipe_args = RecipeArgs(
            uri=args.uri, recipe=found.recipe, request=found.instruction or None, profile=args.profile
        )
        return await run_recipe_command(session, port, recipe_args, finish=lambda new: without_line(new, comment))
    request = (
        f"{found.instruction}\n\n(This instruction was written in the file as the comment `{comment.strip()}` "
        f"on line {args.line + 1}; that comment will be removed.)"
    )
    return await edit(
        session,
        port,
        EditArgs(uri=args.uri, request=request, agent=args.agent or found.agent, profile=args.profile),
        finish=lambda staged: without_line(staged, comment),
    )
