"""Issue 26 for every client, plugin or not: a run's `coupling` hints and `historyWarnings`, and a review's hunk
`warnings`, as Hint diagnostics (source "nagent", code "nagent.coupling" / "nagent.recentFix"), and the code actions
"nagent: include X" (the same `nagent.edit` request again, with `@X` — contracts.md D's mention — so the file is in
scope) and "nagent: open X's conversation" (`nagent.conversation.open` on X).

The results of the commands that end in a change set are read on their way out (`CommandTable.execute`): they go
back unchanged, and its checks are kept per document (`HistoryMarks`) and published beside the pending-review marks
(lsp/port.py's `publish_review` adds them: one publishDiagnostics per document holds both). A document's marks are
replaced by the next run on it."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.lsp.server import NagentServer

if TYPE_CHECKING:  # the edit stack loads at the first code action, not at start-up (issue 29)
    from nagent_lsp.operations.code_actions import Offer

log = logging.getLogger("nagent_lsp")

WRAPPED = (
    "nagent.edit",
    "nagent.instruction.apply",
    "nagent.recipe.run",
    "nagent.conversation.send",
    "nagent.review.show",
)
COUPLING_CODE = "nagent.coupling"
FIX_CODE = "nagent.recentFix"


@attrs.frozen
class Mark:
    line: int
    code: str
    message: str
    partner: str | None = None  # workspace-relative, as an @mention names it
    partner_uri: str | None = None
    request: str | None = None  # the request to run again with the partner in scope


class HistoryMarks:
    """uri -> the history marks shown on it (event loop only)."""

    def __init__(self) -> None:
        self.by_uri: dict[str, list[Mark]] = {}

    def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        return [
            types.Diagnostic(
                range=types.Range(types.Position(m.line, 0), types.Position(m.line + 1, 0)),
                message=m.message,
                severity=types.DiagnosticSeverity.Hint,
                source="nagent",
                code=m.code,
                data={"partner": m.partner, "partnerUri": m.partner_uri} if m.partner else None,
            )
            for m in self.by_uri.get(uri, [])
        ]


def marks_of(server: NagentServer) -> HistoryMarks:
    found = getattr(server, "history_marks", None)
    if not isinstance(found, HistoryMarks):
        found = HistoryMarks()
        server.history_marks = found  # type: ignore[attr-defined]
    return found


def _mention(partner_uri: str, target: Path, folders: list[Path]) -> str:
    """The partner as an `@path` mention: relative to the workspace folder holding the target, quoted when it
    holds a space."""
    path = uri_to_path(partner_uri)
    folder = next((f for f in folders if target.is_relative_to(f)), target.parent)
    rel = os.path.relpath(path, folder) if path is not None else partner_uri
    rel = Path(rel).as_posix()
    return f'@"{rel}"' if " " in rel else f"@{rel}"


def _first_changed(result: dict[str, object], uri: str) -> int:
    return next((int(w.get("line") or 0) for w in _dicts(result.get("historyWarnings")) if w.get("uri") == uri), 0)


def _hint_marks(server: NagentServer, result: dict[str, object], request: str | None) -> dict[str, list[Mark]]:
    fresh: dict[str, list[Mark]] = {}
    for hint in _dicts(result.get("coupling")):
        uri = str(hint.get("uri") or "")
        target = uri_to_path(uri)
        if target is None:
            continue
        partner = _mention(str(hint["partnerUri"]), target, list(server.session.workspace_folders))
        line = int(hint.get("line") or _first_changed(result, uri))
        mark = Mark(line, COUPLING_CODE, str(hint["message"]), partner, str(hint["partnerUri"]), request)
        fresh.setdefault(uri, []).append(mark)
    return fresh


def _dicts(value: object) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def collect(server: NagentServer, name: str, argument: object, result: dict[str, object]) -> None:
    """Keep the marks a command's result carries (replacing those of the documents it names), then publish."""
    request = argument.get("request") if isinstance(argument, dict) and name == "nagent.edit" else None
    request = result.get("request") if isinstance(result.get("request"), str) else request  # conversation.send
    fresh = _hint_marks(server, result, request if isinstance(request, str) else None)
    for warning in _dicts(result.get("historyWarnings")):
        fresh.setdefault(str(warning.get("uri")), []).append(
            Mark(int(warning.get("line") or 0), FIX_CODE, str(warning["message"]))
        )
    for file in _dicts(result.get("files")) if name == "nagent.review.show" else []:
        for hunk in _dicts(file.get("hunks")):
            for message in hunk.get("warnings") or []:
                line = int(hunk["range"]["start"]["line"])
                fresh.setdefault(str(file["uri"]), []).append(Mark(line, FIX_CODE, str(message)))
    changed = {f["uri"] for f in _dicts(result.get("files")) if isinstance(f.get("uri"), str)}
    store = marks_of(server)
    touched = set(fresh) | changed
    for uri, marks in list(store.by_uri.items()):  # a hint whose partner this run changed is answered
        kept = [m for m in marks if m.partner_uri not in changed]
        if len(kept) != len(marks):
            store.by_uri[uri] = kept
            touched.add(uri)
    for uri in touched:
        if uri in fresh or uri in changed:
            store.by_uri[uri] = fresh.get(uri, [])
        server.in_background(asyncio.ensure_future(_publish(server, uri)))


async def _publish(server: NagentServer, uri: str) -> None:
    from nagent_lsp.lsp.features.review import ReviewPort
    from nagent_lsp.operations import review

    try:
        port = ReviewPort(server)
        marks = await asyncio.to_thread(review.marks_for, server.session, port, uri)
        port.publish_review(uri, marks)  # with this document's history marks (lsp/port.py)
    except Exception as exc:  # noqa: BLE001 - a hint is a help: never fail the command for it
        log.info("could not show the history checks of %s: %s", uri, exc)


def offers(server: NagentServer, uri: str, start: int, end: int) -> list[Offer]:
    """The code actions on lines start..end of `uri`: include each hinted partner, open its conversation."""
    from nagent_lsp.operations.code_actions import Offer

    found: list[Offer] = []
    for mark in marks_of(server).by_uri.get(uri, []):
        if mark.partner is None or not start <= mark.line <= max(start, end):
            continue
        name = mark.partner.lstrip("@").strip('"')
        if mark.request:
            again = {"uri": uri, "request": f"{mark.request}\n\n{mark.partner}"}
            found.append(Offer(f"nagent: include {name}", "quickfix", "nagent.edit", again))
        found.append(
            Offer(
                f"nagent: open {name}'s conversation", "quickfix", "nagent.conversation.open", {"uri": mark.partner_uri}
            )
        )
    return found


def register(server: NagentServer) -> None:
    """Every command runs through `server.commands.execute` (workspace/executeCommand, nagent.codeAction.run): the
    results of those in WRAPPED are read on the way out, unchanged."""
    table = server.commands
    original = table.execute

    async def execute(ls: NagentServer, name: str, arguments: Sequence[object] | None) -> dict[str, Any]:
        result = await original(ls, name, arguments)
        if name in WRAPPED and isinstance(result, dict):
            try:
                collect(ls, name, arguments[0] if arguments else None, result)
            except Exception as exc:  # noqa: BLE001 - the result goes back whatever happens to its hints
                log.info("history marks of %s not shown: %s", name, exc)
        return result

    table.execute = execute  # type: ignore[method-assign, assignment]
