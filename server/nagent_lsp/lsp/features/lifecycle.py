"""Initialisation and settings: initializationOptions, then workspace/configuration pulled after `initialized`
and again on every didChangeConfiguration. Each invalid value is shown once, naming the key. After `initialized`,
a worker thread clears the temp files that killed writes left in the workspace's state roots."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from nagent_lsp.lsp.capabilities import can_pull_configuration
from nagent_lsp.lsp.server import NagentServer
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")
CONFIG_TIMEOUT = 5.0


def register(server: NagentServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls: NagentServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.session.init_options = options if isinstance(options, dict) else None
        folders = [Path(path) for f in params.workspace_folders or [] if (path := to_fs_path(f.uri))]
        if not folders and (params.root_uri or params.root_path):
            root = to_fs_path(params.root_uri) if params.root_uri else params.root_path
            folders = [Path(root)] if root else []
        ls.session.workspace_folders = folders
        _reload(ls)

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: NagentServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()  # log records from worker threads are sent through it
        ls.client_ready = True
        for problem in ls.pending_problems:
            _show(ls, problem)
        ls.pending_problems = []
        await pull_configuration(ls)
        ls.in_background(ls.loop.run_in_executor(None, clean_state_roots, ls.session))
        # Git and shell commands run in a PID namespace probed once (core/isolation.py, ~15 ms): probe it now, so the
        # first hover's git process does not pay for it.
        ls.in_background(ls.loop.run_in_executor(None, _probe_isolation))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_did_change_configuration(ls: NagentServer, params: types.DidChangeConfigurationParams) -> None:
        pushed = params.settings.get("nagent") if isinstance(params.settings, dict) else None
        if not await pull_configuration(ls) and isinstance(pushed, dict):
            ls.session.workspace_config = pushed
            _reload(ls)

    @server.feature(types.SHUTDOWN)
    def on_shutdown(ls: NagentServer, params: None = None) -> None:
        # Stop background history work (and its git processes) without waiting on the loop for a model reply.
        for service in list(ls.session.history_services.values()):
            try:
                service.close(wait=False)
            except Exception as exc:  # shutting down anyway
                log.info("closing a history service: %s", exc)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def on_folders(ls: NagentServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.session.workspace_folders = ls.folder_paths()
        _reload(ls)


async def pull_configuration(ls: NagentServer) -> bool:
    """Ask the client for section `nagent`; False when the client cannot answer."""
    if not can_pull_configuration(ls.client_capabilities):
        return False
    params = types.ConfigurationParams(items=[types.ConfigurationItem(section="nagent")])
    try:
        result = await asyncio.wait_for(ls.workspace_configuration_async(params), CONFIG_TIMEOUT)
    except Exception as exc:  # timeout, error reply or a reply pygls cannot parse
        log.info("workspace/configuration unavailable: %s", exc)
        return False
    value = result[0] if isinstance(result, (list, tuple)) and result else None
    log.debug("workspace/configuration answered %r", type(value).__name__)
    ls.session.workspace_config = value if isinstance(value, dict) else None
    _reload(ls)
    return True


def _probe_isolation() -> None:
    from nagent_lsp.core.isolation import namespace_prefix_blocking

    namespace_prefix_blocking()


def clean_state_roots(session: Session) -> None:
    """Delete stale temp files of atomic writes (store.atomic) in every state root this session may use."""
    from nagent_lsp.config.state_root import home_root
    from nagent_lsp.store.atomic import remove_stale_temp_files
    from nagent_lsp.store.transaction import recover_all

    try:
        roots = {home_root(), session.state_root(None).path}
        roots.update(session.state_root(folder).path for folder in session.workspace_folders)
    except (OSError, ValueError) as exc:
        log.info("could not list the state roots to clean: %s", exc)
        return
    recover_all(sorted(roots))  # a change set a killed CLI left half written: finished or undone first
    for root in sorted(roots):
        try:
            if not root.is_dir():
                continue
            removed = remove_stale_temp_files(root)
        except OSError as exc:
            log.info("could not look for stale temp files in %s: %s", root, exc)
            continue
        if removed:
            log.info("removed %d stale temp file(s) left in %s by an interrupted write", len(removed), root)


def _reload(ls: NagentServer) -> None:
    for problem in ls.session.reload():  # each problem once: the session returns only new ones
        text = str(problem)
        log.info("%s", text)
        if ls.client_ready:
            _show(ls, text)
        else:
            ls.pending_problems.append(text)


def _show(ls: NagentServer, text: str) -> None:
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=text))
