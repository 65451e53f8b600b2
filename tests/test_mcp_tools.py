"""MCP tools (agent/mcp_tools.py) against a real stdio MCP server written here with the `mcp` SDK: listed for the
initial context, called under the `tools` permission (ask: Allow / Always / Deny), results bounded, errors as
results; and ACP's `mcpServers` checked at session/new."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nagent_lsp.agent.mcp_tools import McpServer, McpTools, ToolCallError, ToolPolicy, parse_call
from tests.acp_client import acp_agent

SERVER = '''
import sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")
MARK = Path(sys.argv[1])


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    MARK.write_text(f"called {a} {b}")
    return a + b


@app.tool()
def big(n: int) -> str:
    """A long text."""
    return "x" * n


@app.tool()
def boom() -> str:
    """Always fails."""
    raise ValueError("boom went the tool")


app.run("stdio")
'''


class Asking:
    def __init__(self, *answers: str | None):
        self.answers = list(answers)
        self.asked: list[str] = []

    async def ask(self, message: str, choices: list[str]) -> str | None:
        self.asked.append(message)
        return self.answers.pop(0) if self.answers else None


@pytest.fixture
def calc(tmp_path: Path) -> tuple[McpServer, Path]:
    script = tmp_path / "calc_server.py"
    script.write_text(SERVER, encoding="utf-8")
    mark = tmp_path / "called.txt"
    return McpServer("calc", "stdio", command=sys.executable, args=(str(script), str(mark))), mark


async def test_tools_are_listed_and_called_under_ask(calc) -> None:
    server, mark = calc
    async with McpTools.open([server]) as tools:
        assert set(tools.tools) == {"calc/add", "calc/big", "calc/boom"}
        described = tools.describe()
        assert "calc/add: Add two numbers." in described and '"a"' in described and "<nagent-tool" in described
        port = Asking("Allow")
        block = await tools.call(parse_call("calc/add", '{"a": 2, "b": 3}'), ToolPolicy(), port)
        assert block.startswith('<nagent-tool-result name="calc/add">') and "\n5\n" in block
        assert "calc/add" in port.asked[0] and '"a": 2' in port.asked[0]
        assert mark.read_text() == "called 2 3"


async def test_deny_and_an_unanswered_ask_never_call_the_tool(calc) -> None:
    server, mark = calc
    async with McpTools.open([server]) as tools:
        denied = await tools.call(parse_call("calc/add", '{"a": 1, "b": 1}'), ToolPolicy(), Asking("Deny"))
        unanswered = await tools.call(parse_call("calc/add", '{"a": 1, "b": 1}'), ToolPolicy(), Asking(None))
        by_rule = await tools.call(
            parse_call("calc/add", '{"a": 1, "b": 1}'), ToolPolicy(rules=[("calc/*", "deny")]), Asking("Allow")
        )
    assert 'error="true"' in denied and "denied" in denied
    assert "could not be asked" in unanswered
    assert "denied by the tools permission" in by_rule
    assert not mark.exists()


async def test_always_is_remembered_and_allow_rules_do_not_ask(calc) -> None:
    server, _mark = calc
    async with McpTools.open([server]) as tools:
        policy, port = ToolPolicy(), Asking("Always")
        for _ in range(2):
            assert "\n3\n" in await tools.call(parse_call("calc/add", '{"a": 1, "b": 2}'), policy, port)
        assert len(port.asked) == 1
        quiet = Asking()
        await tools.call(parse_call("calc/add", '{"a": 1, "b": 2}'), ToolPolicy(default="allow"), quiet)
        assert quiet.asked == []


async def test_results_are_bounded_and_failures_are_results(calc) -> None:
    server, _mark = calc
    allow = ToolPolicy(default="allow")
    async with McpTools.open([server]) as tools:
        big = await tools.call(parse_call("calc/big", '{"n": 200000}'), allow, Asking())
        boom = await tools.call(parse_call("calc/boom", ""), allow, Asking())
        unknown = await tools.call(parse_call("calc/nope", "{}"), allow, Asking())
    assert len(big) < 70_000 and "more characters cut" in big
    assert 'error="true"' in boom and "Error executing tool boom" in boom
    assert "no MCP tool calc/nope" in unknown and "calc/add" in unknown


def test_a_malformed_call_is_refused_with_a_reason() -> None:
    for name, body, why in [
        ("add", "{}", "SERVER/TOOL"),
        ("calc/add", "{not json", "not JSON"),
        ("calc/add", "[1, 2]", "JSON object"),
    ]:
        with pytest.raises(ToolCallError, match=why):
            parse_call(name, body)


async def test_a_server_that_does_not_start_is_a_problem_not_a_failure(calc, tmp_path: Path) -> None:
    server, _mark = calc
    broken = McpServer("broken", "stdio", command=str(tmp_path / "missing-binary"))
    remote = McpServer("remote", "http", url="http://127.0.0.1:9/mcp")
    async with McpTools.open([broken, remote, server]) as tools:
        assert set(tools.tools) == {"calc/add", "calc/big", "calc/boom"}
    assert any("broken" in p for p in tools.problems) and any("only stdio" in p for p in tools.problems)


def test_a_repository_can_only_narrow_the_tools_permission() -> None:
    mine = ToolPolicy(default="ask", rules=[("calc/*", "allow")])
    theirs = ToolPolicy(default="allow", rules=[("calc/add", "allow"), ("*", "deny")])
    merged = mine.narrowed(theirs)
    assert merged.default == "ask"  # allow from a repository never loosens ask
    assert merged.mode_of("calc/add") == "deny"  # a repository may deny what the user allows (strictest wins)
    assert mine.narrowed(ToolPolicy(rules=[("calc/add", "ask")])).mode_of("calc/add") == "ask"
    assert mine.narrowed(ToolPolicy(rules=[("other/*", "allow")])).mode_of("other/x") == "ask"  # never widened
    assert merged.mode_of("other/x") == "deny"  # narrowing is taken


async def test_acp_session_new_checks_its_mcp_servers(workspace, isolated_home, model_env) -> None:
    from acp.schema import McpServerStdio

    servers = [McpServerStdio(name="calc", command="python3", args=[], env=[])] * 2
    async with acp_agent(workspace, isolated_home, model_env) as (conn, _client, _):
        with pytest.raises(Exception) as refused:
            await conn.new_session(cwd=str(workspace), mcp_servers=servers)
        assert refused.value.data["field"] == "mcpServers[1].name"
        assert "duplicate MCP server name 'calc'" in refused.value.data["message"]
        ok = await conn.new_session(cwd=str(workspace), mcp_servers=servers[:1])
        assert ok.session_id


WHERE_SERVER = '''
import os, sys
from mcp.server.mcpserver import MCPServer

app = MCPServer("where")
PARENT = sys.argv[1]


@app.tool()
def where() -> str:
    """Whether the process that started this server is visible."""
    return f"parent visible: {os.path.exists('/proc/' + PARENT)}; key: {'OPENAI_API_KEY' in os.environ}"


app.run("stdio")
'''


async def test_an_mcp_server_runs_isolated_like_a_shell_command(tmp_path: Path, monkeypatch) -> None:
    """An MCP server is a process the server starts: like shell commands and git it gets a PID namespace of its own
    (the server's /proc, its memory and environ, is not there) and no key variable."""
    import os

    from nagent_lsp.core.isolation import namespace_prefix_blocking

    if namespace_prefix_blocking() is None:
        pytest.skip("no PID namespace on this system (the fallback makes the server non-dumpable)")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-reach-the-mcp-server")
    script = tmp_path / "where_server.py"
    script.write_text(WHERE_SERVER, encoding="utf-8")
    server = McpServer("where", "stdio", command=sys.executable, args=(str(script), str(os.getpid())))
    async with McpTools.open([server]) as tools:
        block = await tools.call(parse_call("where/where", "{}"), ToolPolicy(), Asking("Allow"))
    assert "parent visible: False; key: False" in block, block
