"""MCP tools for a run (issue 24): the stdio MCP servers a client (ACP `mcpServers`) or the user's config names,
connected with the official `mcp` SDK; their tools listed for the initial context; a call by `SERVER/TOOL` with a
JSON object of arguments, under the `tools` permission, answered as a bounded `<nagent-tool-result>`.

Wired into the run: `operations.edit` opens `tools_for_run(servers_for(port, settings.mcpServers), settings.tools)`
for the run (an ACP port carries its session's servers; else the user's `mcpServers`), lists `describe()` in the
initial context, and agent/tools.py answers the model's `<nagent-tool>` (tags/tool.py) with `McpTools.run`.

Permission (`ToolPolicy`, the `tools` setting): rules of name globs → allow / ask / deny; the STRICTEST matching rule
wins, else the default (ask). A repository's rules may only narrow (config.settings keeps only its ask/deny rules;
`ToolPolicy.narrowed` the same for policies). Under ask the port asks (Allow / Always / Deny; Always lasts the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from nagent_lsp.config.settings import McpServerSetting
from nagent_lsp.core.isolation import make_undumpable, namespace_prefix
from nagent_lsp.tags.transcript import render_block

if TYPE_CHECKING:
    from mcp import ClientSession

log = logging.getLogger("nagent_lsp")

Mode = Literal["allow", "ask", "deny"]
MODES: tuple[Mode, ...] = ("allow", "ask", "deny")
STRICTNESS: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
RESULT_LIMIT = 64 * 1024  # characters of a tool's result kept (the rest is cut, and the block says so)
CALL_TIMEOUT = 120.0
CONNECT_TIMEOUT = 30.0
ALLOW, ALWAYS, DENY = "Allow", "Always", "Deny"


@attrs.frozen
class McpServer:
    """One MCP server: `stdio` runs `command args` with `env` added; `http`/`sse` name a `url` with `headers` (kept
    so the engine can say it does not connect them)."""

    name: str
    kind: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class ToolInfo:
    server: str
    name: str
    description: str
    schema: dict[str, Any]

    @property
    def full_name(self) -> str:
        return f"{self.server}/{self.name}"


class Asker(Protocol):
    async def ask(self, message: str, choices: list[str]) -> str | None: ...


@attrs.define
class ToolPolicy:
    """`tools` permission: (glob, mode) rules on "SERVER/TOOL"; the STRICTEST matching rule wins (deny > ask > allow),
    a name no rule matches gets `default`. Strictest-wins is what makes a repository's rules safe to add: with
    first-match, a rule put in front could widen what a later rule of the user's narrowed."""

    default: Mode = "ask"
    rules: list[tuple[str, Mode]] = attrs.Factory(list)
    always: set[str] = attrs.Factory(set)

    def mode_of(self, name: str) -> Mode:
        matching = [mode for glob, mode in self.rules if fnmatch.fnmatchcase(name, glob)]
        return max(matching, key=STRICTNESS.__getitem__) if matching else self.default

    @classmethod
    def of(cls, setting: Mapping[str, str]) -> ToolPolicy:
        """The `tools` setting ({glob: mode}, already narrowed by config.settings) as a policy."""
        return cls("ask", [(glob, mode) for glob, mode in setting.items() if mode in MODES])

    def narrowed(self, repository: ToolPolicy) -> ToolPolicy:
        """This (the user's) policy with a repository's rules: a repository may only make a tool stricter, so its
        `allow` rules are dropped (they could only widen a name the user's rules leave at the default)."""
        rules: list[tuple[str, Mode]] = [(glob, mode) for glob, mode in repository.rules if mode != "allow"]
        default = max(self.default, repository.default, key=STRICTNESS.__getitem__)
        return ToolPolicy(default, list(self.rules) + rules, set(self.always))

    async def decide(self, name: str, port: Asker, arguments: str) -> tuple[bool, str]:
        mode = self.mode_of(name)
        if mode == "deny":
            return False, f"the tool {name} is denied by the tools permission"
        if mode == "allow" or name in self.always:
            return True, "allowed"
        answer = await port.ask(f"nagent wants to call the MCP tool {name} with:\n\n{arguments}", [ALLOW, ALWAYS, DENY])
        if answer == ALWAYS:
            self.always.add(name)
            return True, "allowed (Always)"
        if answer == ALLOW:
            return True, "allowed once"
        if answer == DENY:
            return False, "the user denied this tool call"
        return False, "tool not called: the user could not be asked or did not answer (tools permission is 'ask')"


@attrs.frozen
class ToolCall:
    server: str
    tool: str
    arguments: dict[str, Any]

    @property
    def full_name(self) -> str:
        return f"{self.server}/{self.tool}"


class ToolCallError(ValueError):
    """A `<nagent-tool>` the server cannot run; the message is the result the model gets."""


def parse_call(name: str | None, body: str) -> ToolCall:
    """`<nagent-tool name="SERVER/TOOL">{json}</nagent-tool>` → a call, or `ToolCallError` saying what is wrong."""
    server, _, tool = (name or "").partition("/")
    if not server or not tool:
        raise ToolCallError('name must be "SERVER/TOOL" (see the tools listed in the initial context)')
    try:
        arguments = json.loads(body) if body.strip() else {}
    except ValueError as exc:
        raise ToolCallError(f"the arguments of {name} are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise ToolCallError(f"the arguments of {name} must be a JSON object")
    return ToolCall(server, tool, arguments)


def bounded(text: str, limit: int = RESULT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters cut]"


class McpTools:
    """The connected servers of one run (or session) and their tools."""

    def __init__(self, policy: ToolPolicy | None = None) -> None:
        self.sessions: dict[str, ClientSession] = {}
        self.tools: dict[str, ToolInfo] = {}
        self.problems: list[str] = []
        self.policy = policy or ToolPolicy()  # the run's `tools` permission (its Always answers last the run)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, servers: Sequence[McpServer]) -> AsyncIterator[McpTools]:
        """Connect every stdio server (one that fails is a problem, not a failure); closed on exit."""
        tools = cls()
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                if server.kind != "stdio" or not server.command:
                    tools.problems.append(f"MCP server {server.name}: only stdio servers are connected")
                    continue
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT):  # in this task: the SDK's scopes must exit here
                        await tools._connect(stack, server)
                except Exception as exc:  # a broken server is reported; the run goes on without it
                    log.warning("MCP server %s did not start: %s", server.name, exc)
                    tools.problems.append(f"MCP server {server.name} did not start: {exc}")
            yield tools

    async def _connect(self, stack: contextlib.AsyncExitStack, server: McpServer) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        assert server.command is not None
        # A server runs like a shell command: in a PID namespace of its own where the system allows (the server's
        # /proc, with its memory, is not there for it), else the server is made non-dumpable first. Its
        # environment is the SDK's short default list plus the configured `env`: no key variable.
        prefix = await namespace_prefix()
        if prefix is None:
            make_undumpable()
        argv = [*(prefix or []), server.command, *server.args]
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(server.env) or None)
        streams = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        listed = await session.list_tools()
        self.sessions[server.name] = session
        for tool in listed.tools:
            info = ToolInfo(server.name, tool.name, tool.description or "", dict(tool.input_schema or {}))
            self.tools[info.full_name] = info

    def describe(self) -> str:
        """The tools as the initial context lists them, with the servers that could not be used (empty: neither)."""
        lines: list[str] = []
        if self.tools:
            lines.append(
                'MCP tools you may call with <nagent-tool name="SERVER/TOOL">{json arguments}</nagent-tool> (the user '
                "may be asked first); the result comes back as <nagent-tool-result>. Tools:"
            )
        for info in self.tools.values():
            schema = json.dumps(info.schema.get("properties", {}), separators=(",", ":"))
            lines.append(f"- {info.full_name}: {' '.join(info.description.split())} arguments: {schema}")
        lines += [f"- not available: {problem}" for problem in self.problems]
        return "\n".join(lines)

    async def run(self, name: str, body: str, port: Asker) -> str:
        """A `<nagent-tool>` of the model: its `<nagent-tool-result>` (a malformed call is an error result)."""
        try:
            call = parse_call(name, body)
        except ToolCallError as exc:
            return _result(name, str(exc), error=True)
        return await self.call(call, self.policy, port)

    async def call(self, call: ToolCall, policy: ToolPolicy, port: Asker) -> str:
        """The `<nagent-tool-result>` block of one call (a refusal or an error is its text)."""
        name = call.full_name
        if name not in self.tools:
            return _result(name, f"no MCP tool {name}; the tools are: {', '.join(self.tools) or 'none'}", error=True)
        allowed, why = await policy.decide(name, port, json.dumps(call.arguments, ensure_ascii=False))
        if not allowed:
            return _result(name, why, error=True)
        try:
            result = await asyncio.wait_for(
                self.sessions[call.server].call_tool(call.tool, call.arguments), CALL_TIMEOUT
            )
        except TimeoutError:
            return _result(name, f"the tool did not answer within {CALL_TIMEOUT:.0f} s", error=True)
        except Exception as exc:  # the server's error is the model's to read, never the run's end
            return _result(name, f"the tool failed: {exc}", error=True)
        texts = [getattr(block, "text", None) or json.dumps(block.model_dump(mode="json")) for block in result.content]
        return _result(name, bounded("\n".join(texts)), error=bool(result.is_error))


def servers_of(setting: Mapping[str, McpServerSetting]) -> list[McpServer]:
    """The user's `mcpServers` setting as servers to connect."""
    return [
        McpServer(name, "stdio", command=server.command, args=tuple(server.args), env=tuple(server.env.items()))
        for name, server in setting.items()
    ]


def servers_for(port: object, setting: Mapping[str, McpServerSetting]) -> list[McpServer]:
    """A run's MCP servers: the ones its client gave (an ACP session's `mcpServers`, which its port carries), else the
    user's `mcpServers` setting (LSP and CLI runs)."""
    given = getattr(port, "mcp_servers", None)
    return list(given) if given is not None else servers_of(setting)


@contextlib.asynccontextmanager
async def tools_for_run(servers: Sequence[McpServer], tools: Mapping[str, str]) -> AsyncIterator[McpTools | None]:
    """The MCP tools of one run under the `tools` setting; None (nothing started) when no server is configured."""
    if not servers:
        yield None
        return
    async with McpTools.open(servers) as opened:
        opened.policy = ToolPolicy.of(tools)
        yield opened


def no_tools_result(name: str) -> str:
    """What `<nagent-tool>` answers in a run with no MCP server."""
    return _result(name, "no MCP server is configured for this run, so there are no tools to call", error=True)


def _result(name: str, text: str, error: bool = False) -> str:
    attrs_: dict[str, object] = {"name": name}
    if error:
        attrs_["error"] = "true"
    return render_block("nagent-tool-result", text, attrs_)
