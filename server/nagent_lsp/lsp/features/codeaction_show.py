"""Code actions for editors without a nagent plugin (Helix, Kate, Zed…): what they are offered and what they see.

A client with a nagent plugin says so in its capabilities, `experimental.nagent = {"requestInput": true}`: the
plugin asks the user for `nagent.edit`'s request (so "nagent: edit selection" is offered to it) and shows every
command's result itself. Any other client runs the command behind a code action and drops its result, so:

- "nagent: edit selection" is not offered (it cannot supply a request; it would always fail with -32602);
- the actions whose result is the point (history, split, patch, an instruction, a recipe) go through
  `nagent.codeAction.run {command, argument}`, which runs the command as usual and then shows its result with
  `window/showMessage` (one line), `window/logMessage` (the whole answer or card) and, where the client supports
  it, `window/showDocument` (a split's first segment; the conversation at its end for a long answer). History,
  split and patch return the command's own result unchanged.
- a run (an instruction, a recipe) answers at once with `{started: true, command}` and goes on in the
  background: clients without a plugin run executeCommand synchronously (eglot blocks Emacs and gives up after
  10 s while the run goes on, issue 25 item 4). It says it started (showMessage when the client has no
  work-done progress), its change arrives as `workspace/applyEdit`, its end (the server's `message` line and the
  answer's first line) or its error as `window/showMessage`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from nagent_lsp.core.identity import uri_to_path
from nagent_lsp.lsp import capabilities as caps
from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.server import NagentServer

if TYPE_CHECKING:  # operations load lazily: start-up answers `initialize` without them
    from nagent_lsp.operations.code_actions import Offer

log = logging.getLogger("nagent_lsp")

RUN_COMMAND = "nagent.codeAction.run"
PLUGIN_KEY = "nagent"  # capabilities.experimental.nagent = {"requestInput": true}
NEEDS_REQUEST = frozenset({"nagent.edit"})
SHOWN = frozenset({"nagent.history", "nagent.split", "nagent.patch", "nagent.instruction.apply", "nagent.recipe.run"})
LONG_RUNNING = frozenset({"nagent.instruction.apply", "nagent.recipe.run"})
SHOW_TIMEOUT = 5.0
MESSAGE_CHARS = 300  # a showMessage line; the whole text goes to logMessage
LOG_CHARS = 20000
LONG_ANSWER_LINES = 4  # a longer answer is also shown in the conversation (showDocument, where supported)
_BACKGROUND: set[asyncio.Task[None]] = set()  # runs started by nagent.codeAction.run, held until they end


@attrs.frozen
class CodeActionRunArgs:
    command: str
    argument: dict[str, Any] = attrs.Factory(dict)


def plugin_capabilities(client_caps: types.ClientCapabilities | None) -> dict[str, Any] | None:
    """The client's `experimental.nagent` object, or None for a client without a nagent plugin."""
    experimental = getattr(client_caps, "experimental", None)
    value = experimental.get(PLUGIN_KEY) if isinstance(experimental, dict) else getattr(experimental, PLUGIN_KEY, None)
    return value if isinstance(value, dict) else None


def supplies_request(client_caps: types.ClientCapabilities | None) -> bool:
    plugin = plugin_capabilities(client_caps)
    return bool(plugin and plugin.get("requestInput") is True)


def adapt_offers(client_caps: types.ClientCapabilities | None, found: Sequence[Offer]) -> list[Offer]:
    """The offers as this client should get them (see the module docstring)."""
    asks = supplies_request(client_caps)
    plugin = plugin_capabilities(client_caps) is not None
    out: list[Offer] = []
    for offer in found:
        if offer.command in NEEDS_REQUEST and not asks:
            continue
        if not plugin and offer.command in SHOWN:
            wrapped = {"command": offer.command, "argument": offer.argument}
            offer = attrs.evolve(offer, command=RUN_COMMAND, argument=wrapped)
        out.append(offer)
    return out


def register(server: NagentServer) -> None:
    async def run(ls: NagentServer, args: CodeActionRunArgs) -> dict[str, Any]:
        if args.command not in SHOWN:
            raise JsonRpcInvalidParams(f"command: expected one of {', '.join(sorted(SHOWN))}, got {args.command!r}")
        if args.command not in ls.commands:
            raise JsonRpcInvalidParams(f"command: {args.command} is not available")
        show = Shower(ls)
        if args.command in LONG_RUNNING:
            show.started(args.command, args.argument)
            task = asyncio.get_running_loop().create_task(_run_in_background(ls, show, args))
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)
            return {"started": True, "command": args.command}
        try:
            result = await ls.commands.execute(ls, args.command, [args.argument])
        except JsonRpcException as exc:
            show.message(types.MessageType.Error, f"nagent: {exc.message}")
            raise
        try:
            await show.result(args.command, args.argument, result if isinstance(result, dict) else {})
        except Exception as exc:  # noqa: BLE001 - showing is a courtesy: the command's result still goes back
            log.info("could not show the result of %s: %s", args.command, exc)
        return result

    register_command(server, RUN_COMMAND, CodeActionRunArgs, run)


async def _run_in_background(ls: NagentServer, show: Shower, args: CodeActionRunArgs) -> None:
    """A run started by `nagent.codeAction.run`: what it did, or why it failed, shown when it ends."""
    try:
        result = await ls.commands.execute(ls, args.command, [args.argument])
    except JsonRpcException as exc:
        show.message(types.MessageType.Error, f"nagent: {exc.message}")
        return
    except Exception as exc:  # noqa: BLE001 - nobody awaits this task: the user hears of it, the log keeps it
        log.error("%s failed in the background: %s", args.command, exc, exc_info=exc)
        show.message(types.MessageType.Error, f"nagent: {args.command} failed; see the server log")
        return
    try:
        await show.result(args.command, args.argument, result if isinstance(result, dict) else {})
    except Exception as exc:  # noqa: BLE001 - showing is a courtesy
        log.info("could not show the result of %s: %s", args.command, exc)


def _name(uri: object) -> str:
    path = uri_to_path(uri) if isinstance(uri, str) else None
    return path.name if path is not None else "the file"


def _one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    more = len(first) > limit or len([line for line in text.splitlines() if line.strip()]) > 1
    return (first[: limit - 1] + "…") if len(first) > limit else first + (" …" if more else "")


def _tokens(tokens: object) -> str:
    if not isinstance(tokens, dict):
        return ""
    text = f"{tokens.get('input', 0)} in / {tokens.get('output', 0)} out tokens"
    if isinstance(tokens.get("cost"), (int, float)):
        text += f", cost {tokens['cost']:.4f}"
    return text


class Shower:
    """window/showMessage, logMessage and showDocument for one command, each gated on the client."""

    def __init__(self, ls: NagentServer):
        self.ls = ls
        self.client_caps = ls.client_capabilities

    def message(self, kind: types.MessageType, text: str) -> None:
        self.ls.window_show_message(types.ShowMessageParams(type=kind, message=_one_line(text)))

    def log(self, text: str) -> None:
        self.ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=text[:LOG_CHARS]))

    async def document(self, path: Path, line: int | None = None, focus: bool = False) -> bool:
        if not caps.can_show_document(self.client_caps):
            return False
        selection = None
        if line is not None:
            position = types.Position(line=max(line, 0), character=0)
            selection = types.Range(start=position, end=position)
        params = types.ShowDocumentParams(uri=path.as_uri(), take_focus=focus, selection=selection)
        try:
            shown = await asyncio.wait_for(self.ls.window_show_document_async(params), SHOW_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - eglot/lsp-mode answer null; a timeout must not fail the command
            log.info("showDocument failed: %s", exc)
            return False
        return bool(getattr(shown, "success", False))

    def started(self, command: str, argument: dict[str, Any]) -> None:
        what = "running recipe " + str(argument.get("recipe")) if command == "nagent.recipe.run" else "working"
        text = f"nagent: {what} on {_name(argument.get('uri'))}…"
        self.log(text)
        if not caps.can_show_progress(self.client_caps):  # else $/progress shows the run
            self.message(types.MessageType.Info, text)

    async def result(self, command: str, argument: dict[str, Any], result: dict[str, Any]) -> None:
        name = _name(argument.get("uri") or result.get("uri"))
        if command == "nagent.history":
            await self._history(name, result)
        elif command == "nagent.split":
            await self._split(name, result)
        elif command == "nagent.patch":
            changed = "applied the segments' changes" if result.get("applied") else "found no change to apply"
            self.message(types.MessageType.Info, f"nagent: patch {changed} ({result.get('edits', 0)} edits)")
        else:
            await self._answer(name, result)

    async def _history(self, name: str, result: dict[str, Any]) -> None:
        commits, authors = result.get("commits") or [], result.get("authors") or []
        text = f"nagent: {name}: {len(commits)} commit{'s' * (len(commits) != 1)} by {len(authors)} author"
        text += "s" * (len(authors) != 1)
        if commits:
            last = commits[0]
            summary = last.get("summary") or last.get("subject") or ""
            text += f"; last {str(last.get('date', ''))[:10]} {last.get('author', '')}: {summary}"
        self.message(types.MessageType.Info, text)
        self.log(str(result.get("markdown") or text))

    async def _split(self, name: str, result: dict[str, Any]) -> None:
        segments = result.get("segments") or []
        index = result.get("indexPath") or ""
        self.message(
            types.MessageType.Info,
            f"nagent: {name} split into {len(segments)} segments in {Path(index).parent}; edit them, then use "
            f"“nagent: merge edited segments back (patch)”",
        )
        self.log("\n".join([f"split of {name}: {index}", *(f"  {s.get('path')}" for s in segments)]))
        if segments and segments[0].get("path"):
            await self.document(Path(segments[0]["path"]), focus=True)

    async def _answer(self, name: str, result: dict[str, Any]) -> None:
        response = str(result.get("response") or "")
        if not response and isinstance(result.get("outputs"), dict):
            response = "\n".join(f"{k}: {v}" for k, v in result["outputs"].items() if k != "fileText")
        if result.get("applied"):
            kind = types.MessageType.Info
        elif result.get("proposal"):
            kind = types.MessageType.Info
        else:
            kind = types.MessageType.Warning
        line = str(result.get("message") or "")  # the server's one line (operations.run_message)
        if not line:
            line = f"{name}: {result.get('reason') or 'done'} ({_tokens(result.get('tokens'))})"
        self.log("\n".join([f"nagent: {line}", "", response]))
        answer = _one_line(response, 200)
        self.message(kind, f"nagent: {line}" + (f" — {answer}" if answer else ""))
        conversation = result.get("conversation")
        path = conversation.get("path") if isinstance(conversation, dict) else None
        if path and len(response.splitlines()) > LONG_ANSWER_LINES:
            text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8", errors="replace")
            lines = text.count("\n")
            await self.document(Path(path), line=lines, focus=False)
