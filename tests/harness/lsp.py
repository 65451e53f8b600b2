"""Drive the real server as a subprocess through LSP, impersonating real editors.

`open_editor(profile, workspace, ...)` starts `python -m nagent_lsp` with an isolated HOME, initialises it
with the capabilities of VS Code, Emacs (eglot 1.9 as Debian ships it) or Neovim, and returns an `Editor`
that keeps its own copy of every open buffer and applies the server's `workspace/applyEdit` to it the way
the editor would (in the negotiated position encoding). It records applyEdit, showMessageRequest and
showDocument requests and can be told how to answer them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities
from pygls.protocol import default_converter
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

PROFILES = ("vscode", "eglot", "neovim")


def capabilities(profile: str) -> types.ClientCapabilities:
    if profile == "vscode":
        return client_capabilities("visual-studio-code")
    if profile == "neovim":
        return client_capabilities("neovim@v0.10.0")
    if profile == "eglot":
        # Debian 12's eglot 1.9 sends no "window" capabilities at all (see reference/clients.md);
        # Emacs 29's captured profile otherwise matches, including its utf-32 preference.
        caps = copy.deepcopy(client_capabilities("emacs"))
        caps.window = None
        return caps
    raise ValueError(f"unknown profile {profile!r}")


@dataclass
class Recorded:
    apply_edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    message_requests: list[types.ShowMessageRequestParams] = field(default_factory=list)
    show_documents: list[types.ShowDocumentParams] = field(default_factory=list)


class Editor:
    def __init__(self, client: LanguageClient, profile: str, workspace: Path):
        self.client = client
        self.profile = profile
        self.workspace = workspace
        self.buffers: dict[str, list[Any]] = {}  # uri -> [text, version]
        self.recorded = Recorded()
        self.answers: list[str | None] = []  # titles to answer showMessageRequest with, in order
        self.reject_edits = 0  # reject this many applyEdits (as a stale-version client would)
        self.encoding = "utf-16"
        self.before_apply: Any = None  # optional callable(params) run before an edit is applied

    # -- buffers ---------------------------------------------------------------------------------
    @staticmethod
    def uri(path: Path) -> str:
        return path.resolve().as_uri()

    def open(self, path: Path, text: str | None = None, language: str = "python") -> str:
        uri = self.uri(path)
        if text is None:
            text = path.read_text(encoding="utf-8")
        self.buffers[uri] = [text, 1]
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text))
        )
        return uri

    def change(self, path: Path, text: str) -> None:
        uri = self.uri(path)
        version = self.buffers[uri][1] + 1
        self.buffers[uri] = [text, version]
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def text(self, path: Path) -> str:
        return self.buffers[self.uri(path)][0]

    # -- requests --------------------------------------------------------------------------------
    async def command(self, name: str, *arguments: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(arguments))
        )

    def start_command(self, name: str, *arguments: Any) -> tuple[Any, asyncio.Future]:
        """Send a command without waiting; returns (request id, future) so a test can cancel it."""
        params = types.ExecuteCommandParams(command=name, arguments=list(arguments))
        before = set(self.client.protocol._request_futures)
        future = asyncio.wrap_future(self.client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND, params))
        new = set(self.client.protocol._request_futures) - before
        return (new.pop() if new else None), future

    def cancel_request(self, request_id: Any) -> None:
        self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))

    async def command_error(self, name: str, *arguments: Any) -> JsonRpcException:
        try:
            result = await self.command(name, *arguments)
        except JsonRpcException as exc:
            return exc
        raise AssertionError(f"{name} succeeded unexpectedly: {result!r}")

    async def hover(self, path: Path, line: int, character: int = 0) -> types.Hover | None:
        return await self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(self.uri(path)), types.Position(line, character))
        )

    # -- applying edits as an editor would ------------------------------------------------------------
    def _apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.recorded.apply_edits.append(params)
        if self.before_apply:
            self.before_apply(params)
        if self.reject_edits > 0:
            self.reject_edits -= 1
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="stale version (simulated)")
        edit = params.edit
        pending: list[tuple[str, list[Any], int | None]] = []
        for change in edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                pending.append((change.text_document.uri, list(change.edits), change.text_document.version))
        for uri, edits in (edit.changes or {}).items():
            pending.append((uri, list(edits), None))
        for uri, edits, version in pending:
            if uri not in self.buffers:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{uri} is not open")
            text, current = self.buffers[uri]
            if version is not None and version != current:
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason=f"version {version} requested, buffer has {current}"
                )
        for uri, edits, _ in pending:
            text, current = self.buffers[uri]
            self.buffers[uri] = [apply_text_edits(text, edits, self.encoding), current + 1]
            # Editors report their own change back to the server.
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=current + 1),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=self.buffers[uri][0])],
                )
            )
        return types.ApplyWorkspaceEditResult(applied=True)


def _offset(text: str, line: int, character: int, encoding: str) -> int:
    """Index into `text` of an LSP position, counting columns in `encoding` code units (independent of the server's code)."""
    lines = text.splitlines(keepends=True)
    if line >= len(lines):
        return len(text)
    start = sum(len(l) for l in lines[:line])
    units = 0
    for i, ch in enumerate(lines[line]):
        if ch in "\r\n" or units >= character:
            return start + i
        units += {"utf-8": len(ch.encode("utf-8")), "utf-16": len(ch.encode("utf-16-le")) // 2}.get(encoding, 1)
    return start + len(lines[line].rstrip("\r\n"))


def apply_text_edits(text: str, edits: list[Any], encoding: str) -> str:
    spans = []
    for e in edits:
        r = e.range
        spans.append(
            (_offset(text, r.start.line, r.start.character, encoding), _offset(text, r.end.line, r.end.character, encoding), e.new_text)
        )
    for start, end, new in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env.update({"HOME": str(home), "PYTHONUNBUFFERED": "1", "GIT_CONFIG_NOSYSTEM": "1"})
    env.update(extra or {})
    return env


@contextlib.asynccontextmanager
async def open_editor(
    profile: str,
    workspace: Path,
    home: Path,
    *,
    env: dict[str, str] | None = None,
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    patch_capabilities: Any = None,
    server_args: tuple[str, ...] = ("-v",),
) -> AsyncIterator[Editor]:
    client = LanguageClient(converter_factory=default_converter)
    ours = {types.WORKSPACE_APPLY_EDIT, types.WINDOW_SHOW_MESSAGE_REQUEST, types.WINDOW_SHOW_DOCUMENT}
    register_lsp_features(client, {m: f for m, f in DEFAULT_CLIENT_FEATURES.items() if m not in ours})
    editor = Editor(client, profile, workspace)
    if configuration is not None:
        client.set_configuration(configuration, section="nagent")

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return editor._apply(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        editor.recorded.message_requests.append(params)
        title = editor.answers.pop(0) if editor.answers else None
        return types.MessageActionItem(title=title) if title else None

    @client.feature(types.WINDOW_SHOW_DOCUMENT)
    def on_show(params: types.ShowDocumentParams) -> types.ShowDocumentResult | None:
        editor.recorded.show_documents.append(params)
        # eglot 1.9 answers requests it does not know with null (reference/clients.md §1.2).
        return None if profile == "eglot" else types.ShowDocumentResult(success=True)

    home.mkdir(parents=True, exist_ok=True)
    await client.start_io(sys.executable, "-m", "nagent_lsp", *server_args, env=server_env(home, env), cwd=str(workspace))
    caps = capabilities(profile)
    if patch_capabilities:
        patch_capabilities(caps)
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=workspace.resolve().as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.resolve().as_uri(), name=workspace.name)],
            initialization_options=init_options,
        )
    )
    encoding = result.capabilities.position_encoding
    editor.encoding = str(encoding.value if hasattr(encoding, "value") else encoding or "utf-16")
    try:
        yield editor
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        with contextlib.suppress(Exception):
            await client.stop()
