"""`nagent-lsp acp`: the ACP agent over stdio (stdout carries only the protocol; logs go to stderr or --log-file).
`nagent-lsp acp --setup`: the terminal auth method — writes the user's model settings interactively."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def run(args: argparse.Namespace) -> int:
    if getattr(args, "setup", False):
        return setup()
    from nagent_lsp.core.long_lived import long_lived

    with long_lived():  # the SDK's models: made once, kept until exit, never collected
        import asyncio

        from acp import AgentSideConnection

        from nagent_lsp.acp.delete_route import add_delete_route
        from nagent_lsp.acp.entry import LazyAgent

        # session/resume and session/close are routed by the SDK only with its "unstable" methods turned on
        from nagent_lsp.acp.transport import guarded_stdio

    async def serve() -> None:
        agent: Any = LazyAgent()  # the SDK's Agent protocol: the methods it advertises
        writer, reader = await guarded_stdio()
        # what the SDK's run_agent does, with the session/delete route added before the first message is read
        conn = AgentSideConnection(agent, writer, reader, listening=False, use_unstable_protocol=True)
        agent.delete_routed = add_delete_route(conn, agent)
        try:
            await conn.listen()
        finally:
            await asyncio.shield(conn.close())

    asyncio.run(serve())
    return 0


def setup() -> int:
    """Ask for the model, its endpoint and the variable holding its key; merge them into ~/.nagent/config.json."""
    from nagent_lsp.config.settings import user_config_path
    from nagent_lsp.store.atomic import atomic_write_text

    path = user_config_path()
    try:
        current = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError) as exc:
        print(f"nagent-lsp: {path} is not readable JSON ({exc}); fix or remove it first", file=sys.stderr)
        return 1
    if not isinstance(current, dict):
        print(f"nagent-lsp: {path} must hold a JSON object", file=sys.stderr)
        return 1
    print(f"nagent model setup (writes {path}); Enter keeps the value shown.")
    for key, question in (
        ("model", "model name"),
        ("baseUrl", "OpenAI-compatible base URL (empty: OpenAI)"),
        ("apiKeyEnv", "environment variable that holds the API key"),
    ):
        try:
            answer = input(f"{question} [{current.get(key, '')}]: ").strip()
        except EOFError:
            return 1
        if answer:
            current[key] = answer
    atomic_write_text(path, json.dumps(current, indent=2) + "\n")
    print(f"written: {path}")
    return 0
