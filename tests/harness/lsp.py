"""Drive the real server as a subprocess through LSP, impersonating real editors.

A server is `python -m nagent_lsp` with an isolated HOME, initialised with the capabilities of VS Code, Emacs
(eglot 1.9 as Debian ships it) or Neovim. A test talks to it through an `Editor` that keeps its own copy of every
open buffer and applies the server's `workspace/applyEdit` to it the way the editor would (in the negotiated
position encoding). It records applyEdit, showMessageRequest and showDocument requests and can be told how to
answer them.

Most tests share servers: the `editors` fixture (tests/conftest.py) hands out an `Editor` on a server of the
session's `ServerPool`, switched to the test's own workspace folder. `open_editor(profile, workspace, home, ...)`
starts a server of the test's own, for what only a fresh server shows: its environment, settings read at start,
a restart, the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

PROFILES = ("vscode", "eglot", "neovim")
MODEL_KEY = "sk-test-marker-000"  # the fake model's API key: a marker that must never reach a conversation or model
# Bounds on waiting for the server, long enough for the busiest machine: they turn a hang into a failure and
# are never what a test asserts.
REQUEST_GUARD = 120.0


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
        self.reject_reason = "stale version (simulated)"  # what a rejection says (a user's "no" names no version)
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
        return await asyncio.wait_for(
            self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=name, arguments=list(arguments))
            ),
            REQUEST_GUARD,
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
        return await asyncio.wait_for(
            self.client.text_document_hover_async(
                types.HoverParams(types.TextDocumentIdentifier(self.uri(path)), types.Position(line, character))
            ),
            REQUEST_GUARD,
        )

    # -- applying edits as an editor would ------------------------------------------------------------
    def _apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:  # noqa: C901, PLR0912  2026-11-27: the fake editor's applyEdit: every client behaviour a test can ask for
        self.recorded.apply_edits.append(params)
        if self.before_apply:
            self.before_apply(params)
        if self.reject_edits > 0:
            self.reject_edits -= 1
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=self.reject_reason)
        edit = params.edit
        pending: list[tuple[str, list[Any], int | None]] = []
        created: list[str] = []
        for change in edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                pending.append((change.text_document.uri, list(change.edits), change.text_document.version))
            elif isinstance(change, types.CreateFile):
                created.append(change.uri)
            else:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"unexpected {change!r}")
        for uri, edits in (edit.changes or {}).items():
            pending.append((uri, list(edits), None))
        for uri in created:  # as editors do: the file is made on disk at once, its text arrives as an edit
            path = Path(uri_to_fs(uri))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        opened: list[str] = []
        for uri, _edits, version in pending:
            if uri not in self.buffers:
                # An edit of a file that is not open opens it (VS Code, Neovim and eglot all load it into a buffer,
                # left unsaved) and tells the server (didOpen below).
                path = Path(uri_to_fs(uri))
                if not path.is_file():
                    return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{uri} does not exist")
                self.buffers[uri] = [path.read_text(encoding="utf-8"), 0]
                opened.append(uri)
            text, current = self.buffers[uri]
            if version is not None and version != current:
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason=f"version {version} requested, buffer has {current}"
                )
        for uri, edits, _ in pending:
            text, current = self.buffers[uri]
            self.buffers[uri] = [apply_text_edits(text, edits, self.encoding), current + 1]
            if uri in opened:
                self.client.text_document_did_open(
                    types.DidOpenTextDocumentParams(
                        types.TextDocumentItem(
                            uri=uri, language_id="text", version=current + 1, text=self.buffers[uri][0]
                        )
                    )
                )
                continue
            # Editors report their own change back to the server.
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=current + 1),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=self.buffers[uri][0])],
                )
            )
        return types.ApplyWorkspaceEditResult(applied=True)


def uri_to_fs(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


def _offset(text: str, line: int, character: int, encoding: str) -> int:
    """Index into `text` of an LSP position, counting columns in `encoding` code units (independent of the
    server's code)."""
    lines = text.splitlines(keepends=True)
    if line >= len(lines):
        return len(text)
    start = sum(len(previous) for previous in lines[:line])
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
            (
                _offset(text, r.start.line, r.start.character, encoding),
                _offset(text, r.end.line, r.end.character, encoding),
                e.new_text,
            )
        )
    for start, end, new in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env.update({"HOME": str(home), "PYTHONUNBUFFERED": "1", "GIT_CONFIG_NOSYSTEM": "1"})
    env.update(extra or {})
    return env


def repository_settings(root: Path, settings: dict[str, Any]) -> Path:
    """Write `<root>/.nagent/config.json`, a settings source a shared server reads when `root` becomes its
    workspace folder (tests that need settings read at start use `open_editor(..., init_options=...)`)."""
    config = root / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(settings) + "\n", encoding="utf-8")
    return config


async def wait_until(condition: Callable[[], Any], timeout: float = 60.0, interval: float = 0.02) -> bool:
    """Wait until `condition()` is true; False after `timeout` seconds. The timeout only keeps a test that is going
    to fail from hanging: callers assert on the state afterwards, never on how long it took."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(interval)
    return True


class _Link:
    """Which Editor the client's handlers serve (a shared server serves one test's Editor after another)."""

    editor: Editor | None = None


def _make_client(link: _Link, profile: str, configuration: dict[str, Any] | None) -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    ours = {types.WORKSPACE_APPLY_EDIT, types.WINDOW_SHOW_MESSAGE_REQUEST, types.WINDOW_SHOW_DOCUMENT}
    register_lsp_features(client, {m: f for m, f in DEFAULT_CLIENT_FEATURES.items() if m not in ours})
    if configuration is not None:
        client.set_configuration(configuration, section="nagent")

    def current() -> Editor:
        if link.editor is None:
            raise RuntimeError("the server sent a request while no test was using it")
        return link.editor

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return current()._apply(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        editor = current()
        editor.recorded.message_requests.append(params)
        title = editor.answers.pop(0) if editor.answers else None
        return types.MessageActionItem(title=title) if title else None

    @client.feature(types.WINDOW_SHOW_DOCUMENT)
    def on_show(params: types.ShowDocumentParams) -> types.ShowDocumentResult | None:
        current().recorded.show_documents.append(params)
        # eglot 1.9 answers requests it does not know with null (reference/clients.md §1.2).
        return None if profile == "eglot" else types.ShowDocumentResult(success=True)

    return client


def _folder(path: Path) -> types.WorkspaceFolder:
    return types.WorkspaceFolder(uri=path.resolve().as_uri(), name=path.name)


async def _launch(  # noqa: PLR0913  2026-11-27: open_editor's options passed through
    client: LanguageClient,
    profile: str,
    workspace: Path,
    home: Path,
    env: dict[str, str] | None,
    init_options: dict[str, Any] | None,
    patch_capabilities: Any,
    server_args: tuple[str, ...],
) -> str:
    """Start the server and initialise it as `profile`; returns the negotiated position encoding."""
    home.mkdir(parents=True, exist_ok=True)
    await client.start_io(
        sys.executable, "-m", "nagent_lsp", *server_args, env=server_env(home, env), cwd=str(workspace)
    )
    caps = capabilities(profile)
    if patch_capabilities:
        patch_capabilities(caps)
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=workspace.resolve().as_uri(),
            workspace_folders=[_folder(workspace)],
            initialization_options=init_options,
        )
    )
    encoding = result.capabilities.position_encoding
    return str(encoding.value if hasattr(encoding, "value") else encoding or "utf-16")


async def _stop(client: LanguageClient) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.shutdown_session(), 10)
    with contextlib.suppress(Exception):
        await client.stop()


@contextlib.asynccontextmanager
async def open_editor(  # noqa: PLR0913  2026-11-27: keyword-only options of the test editor
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
    """A server of its own, started for this editor and shut down after it (for tests of what happens at start,
    of the environment, or across a restart); other tests share one (`SharedServer`)."""
    link = _Link()
    client = _make_client(link, profile, configuration)
    editor = link.editor = Editor(client, profile, workspace)
    editor.encoding = await _launch(
        client, profile, workspace, home, env, init_options, patch_capabilities, server_args
    )
    try:
        yield editor
    finally:
        await _stop(client)


class SharedServer:
    """One server process that serves many tests, one after another, each in a workspace folder of its own.

    `editor(workspace)` makes `workspace` the server's only workspace folder (workspace/didChangeWorkspaceFolders,
    confirmed by a `nagent.status` round trip, which also guarantees that everything the server sent for
    earlier tests has arrived), clears what the client recorded, and yields a fresh `Editor`. A test that fails,
    or leaves a request unanswered, retires the server, so nothing it left running can reach the next test.
    """

    def __init__(
        self, profile: str, base: Path, env: dict[str, str] | None = None, init_options: dict[str, Any] | None = None
    ):
        self.profile = profile
        self.home = base / "home"
        self.root = base / "idle"  # the workspace folder between tests
        self.env = env
        self.init_options = init_options
        self.link = _Link()
        self.client: LanguageClient | None = None
        self.encoding = "utf-16"
        self.folder = self.root
        self.retired = False
        self.served = 0

    async def start(self) -> SharedServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.client = _make_client(self.link, self.profile, None)
        self.encoding = await _launch(
            self.client, self.profile, self.root, self.home, self.env, self.init_options, None, ("-v",)
        )
        return self

    async def stop(self) -> None:
        self.retired = True
        if self.client is not None:
            await _stop(self.client)

    def alive(self) -> bool:
        client = self.client
        process = getattr(client, "_server", None)
        return bool(client and not self.retired and client.error is None and process and process.returncode is None)

    @contextlib.asynccontextmanager
    async def editor(self, workspace: Path) -> AsyncIterator[Editor]:
        client = self.client
        assert client is not None and self.alive(), "the shared server is not running"
        editor = Editor(client, self.profile, workspace)
        editor.encoding = self.encoding
        self.link.editor = editor
        self.served += 1
        clean = False
        try:
            client.workspace_did_change_workspace_folders(
                types.DidChangeWorkspaceFoldersParams(
                    event=types.WorkspaceFoldersChangeEvent(added=[_folder(workspace)], removed=[_folder(self.folder)])
                )
            )
            self.folder = workspace
            status = await editor.command("nagent.status")
            if status.get("workspaceFolders") != [str(workspace.resolve())]:
                raise RuntimeError(f"the server did not switch to {workspace}: {status.get('workspaceFolders')}")
            client.progress_reports.clear()
            client.log_messages.clear()
            client.messages.clear()
            client.shown_documents.clear()
            client.diagnostics.clear()
            yield editor
            clean = True
        finally:
            pending = [f for f in client.protocol._request_futures.values() if not f.done()]
            if clean and not pending and self.alive():
                for uri in editor.buffers:
                    client.text_document_did_close(
                        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
                    )
                self.link.editor = None
            else:
                self.link.editor = None
                await self.stop()


class ServerPool:
    """Shared servers by (profile, model configured or not, initializationOptions), started on first use.

    A server with a model talks to `model_url` with `model_key` and has commit summaries turned off in its user
    config (they would take replies scripted for the edit loop); one without a model has neither."""

    def __init__(self, base: Path, model_url: str, model_key: str):
        self.base = base
        self.model_url = model_url
        self.model_key = model_key
        self.servers: dict[tuple[str, bool, str], SharedServer] = {}
        self.started = 0

    def model_env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.model_url, "OPENAI_API_KEY": self.model_key, "NAGENT_MODEL": "fake-model"}

    async def get(
        self, profile: str, *, model: bool = False, init_options: dict[str, Any] | None = None
    ) -> SharedServer:
        key = (profile, model, json.dumps(init_options, sort_keys=True))
        server = self.servers.get(key)
        if server is not None and server.alive():
            return server
        if server is not None:
            await server.stop()
        self.started += 1
        base = self.base / f"{self.started:02d}-{profile}{'-model' if model else ''}"
        server = SharedServer(profile, base, self.model_env() if model else None, init_options)
        if model:
            config = server.home / ".nagent" / "config.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text('{"history": {"summarize": false}}\n', encoding="utf-8")
        self.servers[key] = server
        return await server.start()

    async def close(self) -> None:
        servers, self.servers = list(self.servers.values()), {}
        await asyncio.gather(*(server.stop() for server in servers))


class Editors:
    """What a test uses to get an editor on a shared server: `async with editors.open("vscode", workspace) as e`."""

    def __init__(self, pool: ServerPool):
        self.pool = pool

    @property
    def model_key(self) -> str:
        return self.pool.model_key

    @contextlib.asynccontextmanager
    async def open(
        self, profile: str, workspace: Path, *, model: bool = False, init_options: dict[str, Any] | None = None
    ) -> AsyncIterator[Editor]:
        server = await self.pool.get(profile, model=model, init_options=init_options)
        async with server.editor(workspace) as editor:
            yield editor
