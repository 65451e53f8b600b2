"""What the code-action menu offers on a range of a file: the way into nagent for editors without a plugin
(Helix, Kate, Zed…). Each offer names a command and its argument; lsp/features/codeaction.py turns them into
LSP code actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import ReadRules
from nagent_lsp.agent.splits import load_trusted_split
from nagent_lsp.core.errors import SplitError
from nagent_lsp.operations.buffers import read_rules
from nagent_lsp.operations.instruction import comment_at
from nagent_lsp.operations.session import Session
from nagent_lsp.store.split_index import INDEX, find_split_dirs


@attrs.frozen
class Offer:
    title: str
    kind: str  # an LSP CodeActionKind value: "quickfix", "refactor.rewrite", "refactor"
    command: str
    argument: Mapping[str, object]  # the command's JSON argument, as the client sends it back
    preferred: bool = False


def offers(
    session: Session, uri: str, path: Path, lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]
) -> list[Offer]:
    """The actions for the (line, character) range start..end of the file `uri` (at `path`) holding `lines`.

    None for a file the read rules refuse (outside the workspace, a denyRead match): every command offered would
    be refused, and nothing is looked up on its behalf."""
    rules = read_rules(session, path)
    if not rules.allows(path):
        return []
    found: list[Offer] = review_offers(session, uri, lines, start, end)
    for line in range(start[0], min(end[0], len(lines) - 1) + 1):
        comment = comment_at(lines[line])
        if comment and comment.recipe and _untrusted_workspace_recipe(session, path, comment.recipe):
            break  # a comment a clone brought must not make a stranger's recipe one click away (DESIGN §12)
        if comment:
            text = f"{comment.instruction[:40]}{'…' if len(comment.instruction) > 40 else ''}"
            if comment.recipe:
                title = f"nagent: run recipe {comment.recipe}" + (f" ({text})" if text else "")
            elif comment.agent:
                title = f"nagent: apply this instruction with agent {comment.agent} ({text})"
            else:
                title = f"nagent: apply this instruction ({text})"
            argument = {"uri": uri, "line": line}
            found.append(Offer(title, "quickfix", "nagent.instruction.apply", argument, preferred=True))
            break
    if start != end:
        # The client supplies `request` (it must ask the user for it): only clients that say they can get this
        # action (lsp/features/codeaction_show.py).
        selection = {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}
        edit = {"uri": uri, "range": selection}
        found.append(Offer("nagent: edit selection", "refactor.rewrite", "nagent.edit", edit))
    found += _recipe_offers(session, uri, path, start, end)
    found.append(Offer("nagent: split this file into segments", "refactor", "nagent.split", {"uri": uri}))
    for segment_dir in _latest_split(session, path, rules):
        index = {"indexPath": str(segment_dir / "index.json")}
        found.append(Offer("nagent: merge edited segments back (patch)", "refactor", "nagent.patch", index))
    found.append(Offer("nagent: show this file's history", "refactor", "nagent.history", {"uri": uri}))
    return found


def review_offers(
    session: Session, uri: str, lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]
) -> list[Offer]:
    """The zero-plugin review (DESIGN §9): on a pending hunk (a Hint diagnostic), accept or reject it — the others
    stay pending — or accept or reject every hunk of its proposal."""
    from nagent_lsp.operations.review import marks_for

    found: list[Offer] = []
    proposals: list[str] = []
    last = max(len(lines) - 1, 0)
    for mark in marks_for(session, None, uri, "".join(lines) if lines else None):
        first = min(mark.start_line, last) if lines else mark.start_line  # added past the final newline: last line
        if first > end[0] or max(mark.end_line, first + 1) <= start[0]:
            continue
        one = {"id": mark.proposal, "accept": [mark.hunk], "rest": "keep"}
        found.append(Offer("nagent: accept this change", "quickfix", "nagent.review.apply", one, preferred=True))
        found.append(
            Offer(
                "nagent: reject this change",
                "quickfix",
                "nagent.review.discard",
                {"id": mark.proposal, "hunks": [mark.hunk]},
            )
        )
        if mark.proposal not in proposals:
            proposals.append(mark.proposal)
    for proposal in proposals:
        every = {"id": proposal}
        found.append(Offer("nagent: accept all proposed changes", "quickfix", "nagent.review.apply", every))
        found.append(Offer("nagent: reject all proposed changes", "quickfix", "nagent.review.discard", every))
    return found


def _untrusted_workspace_recipe(session: Session, path: Path, name: str) -> bool:
    """Whether `name` is a repository's recipe (not shadowed by the user's) whose definitions the user has not
    trusted."""
    from nagent_lsp.operations.recipes import recipes_of
    from nagent_lsp.operations.trust import repository_trusted

    state_root = session.state_root(path).path
    recipe = recipes_of(session, state_root).items.get(name)
    return recipe is not None and recipe.source == "workspace" and not repository_trusted(session, state_root)


def _recipe_offers(session: Session, uri: str, path: Path, start: tuple[int, int], end: tuple[int, int]) -> list[Offer]:
    """Offers "nagent: run recipe NAME" for each recipe that needs no request (DESIGN §10), on the selection. A
    repository's recipes only once the user trusts its definitions (DESIGN §12): a one-click action on every file
    is no place for a stranger's step chain."""
    from nagent_lsp.operations.recipes import recipes_of
    from nagent_lsp.operations.trust import repository_trusted

    state_root = session.state_root(path).path
    recipes = recipes_of(session, state_root).items
    if any(r.source == "workspace" for r in recipes.values()) and not repository_trusted(session, state_root):
        recipes = {name: r for name, r in recipes.items() if r.source != "workspace"}
    argument: dict[str, object] = {"uri": uri}
    if start != end:
        argument["range"] = {
            "start": {"line": start[0], "character": start[1]},
            "end": {"line": end[0], "character": end[1]},
        }
    return [
        Offer(f"nagent: run recipe {name}", "refactor", "nagent.recipe.run", {**argument, "recipe": name})
        for name, recipe in sorted(recipes.items())
        if not recipe.needs_request
    ]


def _latest_split(session: Session, path: Path, rules: ReadRules) -> list[Path]:
    """The newest trusted split of this file, if any (offering every old split would only confuse)."""
    root = session.state_root(path).path / "splits"
    try:
        found = sorted(find_split_dirs(root, path), key=lambda d: (d / INDEX).stat().st_mtime)
    except OSError:  # a split removed while we looked: offer none rather than fail the request
        return []
    for folder in reversed(found):
        try:
            load_trusted_split(folder / INDEX, rules, [root])
        except SplitError:
            continue
        return [folder]
    return []
