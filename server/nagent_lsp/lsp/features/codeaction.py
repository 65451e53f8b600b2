"""Code actions: the way into nagent for editors without a plugin (Helix, Kate, Zed…)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.operations.instruction import apply_instruction, instruction_at

KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Refactor]


def register(server: Any) -> None:
    async def run(ls: Any, raw: Any) -> dict[str, Any]:
        return await apply_instruction(ls.session, LspPort(ls), raw)

    register_command(server, "nagent.instruction.apply", run)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS))
    def code_actions(ls: Any, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        if not to_fs_path(uri):
            return []
        doc = ls.workspace.get_text_document(uri)
        lines = doc.lines
        actions: list[types.CodeAction] = []
        rng = params.range
        for line in range(rng.start.line, min(rng.end.line, len(lines) - 1) + 1):
            instruction = instruction_at(lines[line])
            if instruction:
                title = f"nagent: apply this instruction ({instruction[:40]}{'…' if len(instruction) > 40 else ''})"
                command = types.Command(title=title, command="nagent.instruction.apply", arguments=[{"uri": uri, "line": line}])
                actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, command=command, is_preferred=True))
                break
        if (rng.start.line, rng.start.character) != (rng.end.line, rng.end.character):
            # The client supplies `request` (it must ask the user for it): plugins do, others skip this action.
            selection = {"start": {"line": rng.start.line, "character": rng.start.character}, "end": {"line": rng.end.line, "character": rng.end.character}}
            command = types.Command(title="nagent: edit selection", command="nagent.edit", arguments=[{"uri": uri, "range": selection}])
            actions.append(types.CodeAction(title="nagent: edit selection", kind=types.CodeActionKind.RefactorRewrite, command=command))
        path = to_fs_path(uri)
        split = types.Command(title="nagent: split this file into segments", command="nagent.split", arguments=[{"uri": uri}])
        actions.append(types.CodeAction(title=split.title, kind=types.CodeActionKind.Refactor, command=split))
        for segment_dir in _splits_of(ls, path):
            index = str(segment_dir / "index.json")
            patch = types.Command(title="nagent: merge edited segments back (patch)", command="nagent.patch", arguments=[{"indexPath": index}])
            actions.append(types.CodeAction(title=patch.title, kind=types.CodeActionKind.Refactor, command=patch))
        if path:
            history = types.Command(title="nagent: show this file's history", command="nagent.history", arguments=[{"uri": uri}])
            actions.append(types.CodeAction(title=history.title, kind=types.CodeActionKind.Refactor, command=history))
        return actions


def _splits_of(ls: Any, path: str) -> list[Any]:
    """The newest split of this file, if any (offering every old split would only confuse)."""
    from pathlib import Path

    from nagent_lsp.store.splits import find_split_dirs

    root = ls.session.state_root(Path(path)).path / "splits"
    try:
        found = find_split_dirs(root, Path(path))
        return sorted(found, key=lambda d: (d / "index.json").stat().st_mtime)[-1:]
    except OSError:  # a split removed while we looked: offer none rather than fail the request
        return []
