"""The ACP agent: `nagent-lsp acp` answers the Agent Client Protocol (v1) over stdio with the same engine, state root
and artifacts as the language server and the CLI (docs/ARCHITECTURE.md, "ACP ↔ nagent").

`session/prompt` runs `operations.edit.edit` — the loop `nagent.edit` runs — with the change set kept as a proposal
(`preview`), then shows it and asks once before anything is written (`acp.changes`). A slash command runs the
operation it names (`acp.commands`). `session/cancel` sets the run's cancel event: the model call stops, the run
ends `cancelled` and nothing is applied.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import attrs
from acp import RequestError, update_agent_message_text
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    Cost,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfo,
    SetSessionConfigOptionResponse,
    UnstructuredCommandInput,
    UsageUpdate,
)

from nagent_lsp.acp import mcp_servers
from nagent_lsp.acp.capabilities import client_fs, initialize_response
from nagent_lsp.acp.changes import find_record, record_read_back, review_change_set
from nagent_lsp.acp.commands import COMMANDS, run_command
from nagent_lsp.acp.port import AcpPort, new_session_id
from nagent_lsp.acp.replay import answer_text, replay_updates
from nagent_lsp.acp.sessions import (
    PAGE,
    AcpSession,
    conversation_refs,
    find_ref,
    pending_by_conversation,
    session_info,
)
from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.model import ModelError
from nagent_lsp.operations.main_conversation import is_main
from nagent_lsp.operations.session import Session
from nagent_lsp.store.conversations import ConversationError, ConversationRef
from nagent_lsp.tags.transcript import TurnStatus, last_turn_status

log = logging.getLogger("nagent_lsp")

BUILTIN_MODES = ("edit", "plan", "explain")


def invalid(field: str, message: str) -> RequestError:
    return RequestError.invalid_params({"field": field, "message": f"{field}: {message}"})


class NagentAgent:
    """The `Agent` protocol of the ACP SDK (acp/interfaces.py), one per connection."""

    def __init__(self) -> None:
        self.client: Any = None
        self.fs_read = False
        self.fs_write = False
        self.sessions: dict[str, AcpSession] = {}
        self.workspaces: dict[Path, Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        self.fs_read, self.fs_write = client_fs(client_capabilities)
        return initialize_response()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        if method_id != "nagent-setup":
            raise invalid("methodId", f"unknown auth method {method_id!r}; the one method is 'nagent-setup'")
        return None

    def _workspace(self, cwd: str) -> Session:
        path = Path(cwd)
        if not path.is_absolute():
            raise invalid("cwd", f"must be an absolute path, got {cwd!r}")
        if not path.is_dir():
            raise invalid("cwd", f"{cwd} is not a folder")
        top = git_toplevel(str(path))
        folder = Path(os.path.realpath(top or path))
        found = self.workspaces.get(folder)
        if found is None:
            found = self.workspaces[folder] = Session(workspace_folders=[folder])
            for problem in found.reload():
                log.warning("%s", problem)
        return found

    def _open(self, session_id: str, cwd: str, servers: Any, ref: ConversationRef | None) -> AcpSession:
        workspace = self._workspace(cwd)
        try:
            typed = mcp_servers.from_acp(servers)
        except InvalidArgument as exc:
            raise invalid(exc.field, exc.message) from None
        port = AcpPort(self.client, session_id, list(workspace.workspace_folders), self.fs_read, self.fs_write)
        old = self.sessions.get(session_id)
        if old is not None:
            old.port.close()
        state = AcpSession(session_id, Path(cwd), port, typed, ref)
        self.sessions[session_id] = state
        mcp_servers.register(session_id, typed)
        self._announce(state)
        return state

    def _announce(self, state: AcpSession) -> None:
        """The slash commands, once the client knows the session (just after this answer)."""
        commands = [
            AvailableCommand(
                name=name,
                description=description,
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None,
            )
            for name, (description, hint) in COMMANDS.items()
        ]
        update = AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)
        asyncio.get_running_loop().call_soon(state.port.send, update)

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        state = self._open(new_session_id(), cwd, mcp_servers, None)
        return NewSessionResponse(session_id=state.id, config_options=self._config_options(state))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        ref = self._known(cwd, session_id)
        state = self._open(session_id, cwd, mcp_servers, ref)
        try:
            text = ref.conversation_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""  # bound, but no turn written yet
        except OSError as exc:
            why = f"cannot read the conversation {ref.conversation_path}: {exc.strerror or exc}"
            raise RequestError.invalid_request({"message": why}) from None
        for update in replay_updates(text):
            state.port.send(update)
        await state.port.flush()  # ACP: the whole conversation is replayed before the answer
        return LoadSessionResponse(config_options=self._config_options(state))

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        ref = self._known(cwd, session_id)
        state = self._open(session_id, cwd, mcp_servers, ref)
        return ResumeSessionResponse(config_options=self._config_options(state))

    def _known(self, cwd: str, session_id: str) -> ConversationRef:
        workspace = self._workspace(cwd)
        alias = self.sessions.get(session_id)
        ref = alias.ref if alias is not None and alias.ref is not None else find_ref(workspace, session_id)
        if ref is None:
            raise RequestError.resource_not_found(f"session {session_id}")
        return ref

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        state = self.sessions.pop(session_id, None)
        if state is None:
            raise RequestError.resource_not_found(f"session {session_id}")
        state.port.cancel_all()
        state.port.close()
        mcp_servers.forget(session_id)
        return None

    async def delete_session(self, session_id: str, **kwargs: Any) -> None:
        """`session/delete` archives, never removes: the conversation file is moved aside in its folder as
        `{name}-{uuid}` (what `nagent.conversation.clear` does; a running prompt is cancelled and finishes first),
        the session is closed, and the file's empty conversation is no longer listed until a new prompt writes it."""
        state = self.sessions.get(session_id)
        ref = state.ref if state is not None else None
        workspaces = [self._workspace(str(state.cwd))] if state is not None else []
        workspaces += list(self.workspaces.values())
        if ref is None and state is None:
            try:
                workspaces.append(self._workspace(os.getcwd()))  # a session of an earlier process: the agent's cwd
            except RequestError:
                pass
            ref = next((r for w in workspaces if (r := find_ref(w, session_id)) is not None), None)
            if ref is None:
                raise RequestError.resource_not_found(f"session {session_id}")
        if state is not None:
            state.port.cancel_all()
        if ref is not None:
            await self._archive(workspaces[0], ref)
        if state is not None:
            self.sessions.pop(session_id, None)
            state.port.close()
            mcp_servers.forget(session_id)
        return None

    @staticmethod
    async def _archive(workspace: Session, ref: ConversationRef) -> None:
        from nagent_lsp.operations.conversation import store_for

        store = store_for(workspace, Path(ref.path))
        async with store.lock_for(ref):
            archived = store.archive(ref)
        log.info("session/delete: conversation of %s archived as %s", ref.path, archived)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        workspaces = [self._workspace(cwd)] if cwd else list(self.workspaces.values())
        start = 0
        if cursor:
            if not cursor.isdigit():
                raise invalid("cursor", "not a cursor this agent gave")
            start = int(cursor)
        infos: list[SessionInfo] = []
        for workspace in workspaces:
            pending = pending_by_conversation(workspace)
            folder = workspace.workspace_folders[0]
            for ref in conversation_refs(workspace, Path(cwd) if cwd else None):
                fields = session_info(workspace, ref, folder, pending.get(ref.conversation, 0))
                infos.append(SessionInfo(**fields))  # type: ignore[arg-type]
        page = infos[start : start + PAGE]
        more = str(start + PAGE) if start + PAGE < len(infos) else None
        return ListSessionsResponse(sessions=page, next_cursor=more)

    # -- options ------------------------------------------------------------------------------------------
    def _config_options(self, state: AcpSession) -> list[Any]:
        workspace = self._workspace(str(state.cwd))
        modes = list(BUILTIN_MODES)
        try:
            from nagent_lsp.operations.agents import list_agents
            from nagent_lsp.operations.args import ListArgs

            modes += [
                a.name for a in list_agents(workspace, ListArgs()).agents if a.name not in modes and not a.shadowed
            ]
        except (UserError, OSError) as exc:
            log.info("no agents listed: %s", exc)
        profiles = ["default", *sorted(workspace.settings.models)]
        return [
            SessionConfigOptionSelect(
                type="select",
                id="mode",
                name="Agent",
                category="mode",
                current_value=state.agent or "edit",
                options=[SessionConfigSelectOption(value=m, name=m) for m in modes],
            ),
            SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=state.profile or "default",
                options=[SessionConfigSelectOption(value=p, name=p) for p in profiles],
            ),
        ]

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        state = self._state(session_id)
        if config_id == "mode":
            state.agent = None if value == "edit" else str(value)
        elif config_id == "model":
            state.profile = None if value == "default" else str(value)
        else:
            raise invalid("configId", f"unknown option {config_id!r} (mode, model)")
        return SetSessionConfigOptionResponse(config_options=self._config_options(state))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self._state(session_id).agent = None if mode_id == "edit" else mode_id
        return None

    def _state(self, session_id: str) -> AcpSession:
        state = self.sessions.get(session_id)
        if state is None:
            raise RequestError.resource_not_found(f"session {session_id}")
        return state

    # -- prompts ------------------------------------------------------------------------------------------
    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self.sessions.get(session_id)
        if state is not None:
            state.port.cancel_all()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        state = self._state(session_id)
        if state.running:
            raise RequestError.invalid_request({"message": f"session {session_id} is already running a prompt"})
        state.running = True
        state.port.cancel_requested = False
        try:
            reason = await self._prompt(state, prompt)
        except asyncio.CancelledError:
            reason = "cancelled"
        except (UserError, ModelError) as exc:
            state.port.send(update_agent_message_text(f"nagent: {exc}"))
            reason = "end_turn"
        except RequestError:
            raise
        except Exception as exc:  # a defect: said to the user and logged, never the end of the process
            log.exception("session/prompt failed")
            state.port.send(update_agent_message_text(f"nagent: internal error: {type(exc).__name__}: {exc}"))
            reason = "end_turn"
        finally:
            state.running = False
            state.port.forget_progress()
        await state.port.flush()
        return PromptResponse(stop_reason=reason)  # type: ignore[arg-type]

    async def _prompt(self, state: AcpSession, prompt: list[Any]) -> str:
        workspace = self._workspace(str(state.cwd))
        request, named, buffers = read_prompt(prompt)
        if state.ref is None:
            # No file named: the workspace's main conversation (one per folder, shared by every such session).
            state.ref = self._bind(workspace, state, named) if named is not None else self._bind_main(workspace, state)
        path = Path(state.ref.path)
        for uri, text in buffers.items():  # the editor's own text of an attached file is its buffer
            if uri in (path.as_uri(), str(path)):
                from nagent_lsp.core.ports import Buffer

                state.port.buffers[path] = Buffer(path, text, None, path.as_uri())
        await record_read_back(state.port, state.pending_reads)
        if request.startswith("/"):
            return await run_command(self, workspace, state, request)
        return await self.run_edit(workspace, state, request)

    def _bind(self, workspace: Session, state: AcpSession, uri: str) -> ConversationRef:
        from nagent_lsp.operations.conversation import store_for
        from nagent_lsp.operations.edit import target_path

        try:
            path = target_path(workspace, uri)  # confined: outside the workspace or denied → a clear error
            return store_for(workspace, path).resolve(path)
        except ConversationError as exc:
            raise UserError(str(exc)) from None

    @staticmethod
    def _bind_main(workspace: Session, state: AcpSession) -> ConversationRef:
        from nagent_lsp.operations.main_conversation import main_folder, main_ref

        return main_ref(workspace, main_folder(workspace, state.cwd))

    async def run_edit(self, workspace: Session, state: AcpSession, request: str, recipe: str | None = None) -> str:
        assert state.ref is not None
        path = Path(state.ref.path)
        port = state.port
        port.streamed = False
        main = is_main(state.ref)  # the main conversation: `path` is the workspace folder, there is no file to show
        if main and recipe is not None:
            raise UserError("a recipe works on a file: attach one (a resource or resource link) in a file's session")
        if not main and path not in port.buffers:
            await port.fetch_buffer(path)
        uri = path.as_uri()
        from nagent_lsp.acp.context_calls import context_calls

        for call in [] if main else await context_calls(workspace, path, port.next_id("run")):
            port.send(call)
        result = await self._engine_run(workspace, state, uri, request, recipe)
        if not port.streamed and result.response:
            port.send(update_agent_message_text(answer_text(result.response)))
        self._usage(workspace, state, result.tokens)
        if result.reason == "cancelled" or port.cancel_requested:
            return "cancelled"
        if result.proposal is not None:
            record = find_record(workspace, result.proposal)
            if record is not None:
                outcome = await review_change_set(workspace, port, record, state.pending_reads)
                if outcome == "cancelled":
                    return "cancelled"
        elif result.reason and result.reason not in ("no change",):
            port.send(update_agent_message_text(f"\n\n({result.reason})"))
        if result.reason and result.reason.startswith("stopped after maxSteps"):
            return "max_turn_requests"
        return "end_turn"

    async def _engine_run(
        self, workspace: Session, state: AcpSession, uri: str, request: str, recipe: str | None
    ) -> Any:
        """The engine's run of a prompt (a recipe's, else `nagent.edit`'s), a usage_update after each model call."""
        from nagent_lsp.operations.args import EditArgs, RecipeArgs
        from nagent_lsp.operations.edit import edit
        from nagent_lsp.operations.recipes import run_recipe_command

        port = state.port
        start = self._totals(state)
        port.on_model_call = lambda: self._call_usage(workspace, state, start)
        try:
            if recipe is not None:
                args = RecipeArgs(uri=uri, recipe=recipe, request=request or None, preview=True)
                return await run_recipe_command(workspace, port, args)
            edit_args = EditArgs(uri=uri, request=request, preview=True, agent=state.agent)
            if state.profile is not None and "profile" in attrs.fields_dict(EditArgs):
                extra: dict[str, Any] = {"profile": state.profile}  # contract D, when the engine has it
                edit_args = attrs.evolve(edit_args, **extra)
            main = Path(state.ref.path) if state.ref is not None and is_main(state.ref) else None
            return await edit(workspace, port, edit_args, main=main)
        finally:
            port.on_model_call = None

    @staticmethod
    def _totals(state: AcpSession) -> tuple[int, int]:
        """The conversation's token totals so far (its last turn status), to price the calls of a run as they come."""
        status = _last_status(state)
        return (status.tokens_in_total, status.tokens_out_total) if status else (0, 0)

    def _call_usage(self, workspace: Session, state: AcpSession, start: tuple[int, int]) -> None:
        """usage_update after one model call: the context it used (its turn's tokens) and the session's cost so far,
        this run's calls priced with the session's profile (the run's exact cost replaces it when the run ends)."""
        status = _last_status(state)
        used = status.tokens_in + status.tokens_out if status else 0
        from nagent_lsp.llm.models import profile_price

        cost = None
        price = profile_price(workspace.settings, state.profile)
        if price is not None and status is not None:
            run = (status.tokens_in_total - start[0]) * price[0] + (status.tokens_out_total - start[1]) * price[1]
            cost = Cost(amount=round(state.cost + run / 1_000_000, 6), currency="USD")
        elif state.priced:
            cost = Cost(amount=round(state.cost, 6), currency="USD")
        size = workspace.settings.conversation.tokenBudget
        state.port.send(UsageUpdate(session_update="usage_update", used=used, size=size, cost=cost))

    def _usage(self, workspace: Session, state: AcpSession, tokens: Any) -> None:
        """usage_update: the last call's context tokens, the window (the token budget), the session's cost."""
        if tokens.cost is not None:
            state.cost += tokens.cost
            state.priced = True
        status = _last_status(state)
        used = status.tokens_in + status.tokens_out if status else 0
        size = workspace.settings.conversation.tokenBudget
        cost = Cost(amount=round(state.cost, 6), currency="USD") if state.priced else None
        state.port.send(UsageUpdate(session_update="usage_update", used=used, size=size, cost=cost))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _last_status(state: AcpSession) -> TurnStatus | None:
    if state.ref is None:
        return None
    try:
        return last_turn_status(state.ref.conversation_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def read_prompt(prompt: list[Any]) -> tuple[str, str | None, dict[str, str]]:
    """The request text, the first file the prompt names (a resource link or an embedded resource), and the
    texts of embedded resources by URI."""
    texts: list[str] = []
    named: str | None = None
    buffers: dict[str, str] = {}
    for block in prompt:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "resource_link":
            named = named or block.uri
        elif kind == "resource":
            resource = block.resource
            named = named or resource.uri
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                buffers[resource.uri] = text
    return "\n".join(texts).strip(), named, buffers
