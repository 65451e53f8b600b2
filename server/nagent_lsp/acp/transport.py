"""stdio for the ACP agent, with a guard in front of the SDK's reader: the process never dies on bad input.

The SDK drops a line that is not JSON without an answer, and a line that is JSON but not an object (a batch, a
number) or a response with an id it cannot hash stops its receive loop — the agent would be gone. Every line is
checked here first: a parse error or an invalid request is answered (JSON-RPC 2.0, `id: null` when there is no
usable id) and only well-formed messages reach the SDK.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger("nagent_lsp")

LIMIT = 50 * 1024 * 1024  # bytes per message, as the SDK's own default
_pumps: set[asyncio.Task[None]] = set()


def _error(code: int, message: str, ident: Any = None) -> bytes:
    body = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return json.dumps(body).encode("utf-8") + b"\n"


def check_line(line: bytes) -> tuple[bytes | None, bytes | None]:
    """(the line to pass on, the answer to write): at most one of them."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None, _error(-32700, "Parse error: not a JSON-RPC message")
    if not isinstance(message, dict):
        return None, _error(-32600, "Invalid Request: expected one JSON object per line (no batches)")
    ident = message.get("id")
    usable = ident is None or (isinstance(ident, (str, int)) and not isinstance(ident, bool))
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        return None, _error(-32600, "Invalid Request: method must be a string", ident if usable else None)
    if not usable:
        if "method" in message:
            return None, _error(-32600, "Invalid Request: id must be a string or an integer")
        return None, None  # a response to nothing we sent: dropped
    params = message.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        if "id" in message:
            return None, _error(-32602, "Invalid params: params must be an object", ident)
        return None, None
    return line, None


async def guarded_stdio() -> tuple[asyncio.StreamWriter, asyncio.StreamReader]:
    """(the writer to stdout, a reader that sees only checked lines) for `run_agent`."""
    from acp.stdio import stdio_streams

    raw, writer = await stdio_streams(limit=LIMIT)
    checked = asyncio.StreamReader(limit=LIMIT)

    async def pump() -> None:
        try:
            while True:
                try:
                    line = await raw.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    line = exc.partial
                    if not line.strip():
                        break
                except asyncio.LimitOverrunError as exc:
                    await raw.readexactly(exc.consumed)  # a message over the limit: skipped whole
                    while True:
                        try:
                            await raw.readuntil(b"\n")
                            break
                        except asyncio.LimitOverrunError as more:
                            await raw.readexactly(more.consumed)
                    writer.write(_error(-32600, f"Invalid Request: a message over {LIMIT} bytes"))
                    continue
                if not line.strip():
                    continue
                passed, answer = check_line(line.strip())
                if answer is not None:
                    writer.write(answer)
                if passed is not None:
                    checked.feed_data(passed + b"\n")
        except (ConnectionError, OSError) as exc:
            log.info("stdin closed: %s", exc)
        finally:
            checked.feed_eof()

    _pumps.add(asyncio.get_running_loop().create_task(pump()))  # held: a task nobody references may be collected
    return writer, checked
