"""The abuse fuzz's ACP mode: ONE `nagent-lsp acp` process over raw newline-delimited JSON-RPC, fed thousands of
random and malformed requests (wrong types, missing and unknown fields, unknown methods and sessions, paths outside
the workspace, huge strings, non-objects, garbage lines). Every request with an id must be answered, the process
must live to the end and exit cleanly on EOF, and no answer may carry a Python traceback.

No model is configured: a prompt that reaches the engine ends at once with "no model" (the fuzz is about the
protocol, not the model). Sent in batches; each batch waits (event-driven) for every answer it is owed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import server_env

pytestmark = pytest.mark.abuse

REQUESTS = int(os.environ.get("ACP_FUZZ_REQUESTS", 5000))
BATCH = 250
GUARD = float(os.environ.get("ACP_FUZZ_GUARD", 120))
METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/close",
    "session/list",
    "session/prompt",
    "session/set_config_option",
    "session/set_mode",
    "session/fork",
    "session/delete",
    "_nagent/unknown",
    "nonsense",
    "",
]
TRACEBACK = ("Traceback (most recent call last)", 'File "/')


class AcpProcess:
    def __init__(self, cwd: Path, home: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nagent_lsp", "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(cwd),
            env=server_env(home),
        )
        self.answers: dict[str, dict[str, Any]] = {}
        self.null_errors: list[dict[str, Any]] = []
        self.broken: list[bytes] = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.broken.append(line)
                continue
            if not isinstance(message, dict):
                self.broken.append(line)
                continue
            if "method" in message and "id" in message:  # the agent asks something: refuse it
                self.write({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
                continue
            with self.cond:
                if "id" in message and message["id"] is None:
                    self.null_errors.append(message)
                elif "id" in message:
                    self.answers[json.dumps(message["id"])] = message
                self.cond.notify_all()

    def write(self, message: Any) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8") + b"\n"
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def wait_answers(self, ids: list[Any]) -> list[Any]:
        """The ids still unanswered after the guard (normally none; the wait ends as soon as all are in)."""
        keys = [json.dumps(i) for i in ids]
        with self.cond:
            self.cond.wait_for(lambda: all(k in self.answers for k in keys), timeout=GUARD)
            return [i for i, k in zip(ids, keys, strict=True) if k not in self.answers]


def _junk(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(10 if depth < 2 else 7)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.randint(-(2**63), 2**63)
    if choice == 3:
        return rng.random() * 1e6
    if choice == 4:
        return rng.choice(["", "x" * rng.randint(1, 5000), "\x00\ud800", "../../etc/passwd", "file:///etc/passwd"])
    if choice == 5:
        return "/".join(rng.choice(["..", "a", "", "~", "%00"]) for _ in range(rng.randint(1, 6)))
    if choice == 6:
        return rng.choice(["/", "/tmp", "relative/path", "C:\\x"])
    if choice == 7:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["cwd", "sessionId", "prompt", "x", "_meta"]): _junk(rng, depth + 1) for _ in range(3)}


def _params(rng: random.Random, method: str, workspace: Path, sessions: list[str]) -> Any:
    """Mostly plausible params with one thing wrong, sometimes right, sometimes junk."""
    sid = rng.choice(sessions + ["", "no-such", "1:2"]) if sessions else "no-such"
    good: dict[str, Any] = {
        "initialize": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False}}},
        "authenticate": {"methodId": rng.choice(["nagent-setup", "other"])},
        "session/new": {"cwd": str(workspace), "mcpServers": []},
        "session/load": {"cwd": str(workspace), "sessionId": sid, "mcpServers": []},
        "session/resume": {"cwd": str(workspace), "sessionId": sid},
        "session/close": {"sessionId": sid},
        "session/list": {"cwd": str(workspace), "cursor": rng.choice([None, "0", "x", "99"])},
        "session/prompt": {
            "sessionId": sid,
            "prompt": [
                {"type": "text", "text": rng.choice(["hello", "/history", "/review", "/nope", "/agent plan", ""])},
                {
                    "type": "resource_link",
                    "name": "a",
                    "uri": rng.choice([(workspace / "app.py").as_uri(), "file:///etc/passwd", "untitled:x"]),
                },
            ],
        },
        "session/set_config_option": {
            "sessionId": sid,
            "configId": rng.choice(["mode", "model", "x"]),
            "value": "plan",
        },
        "session/set_mode": {"sessionId": sid, "modeId": "plan"},
    }.get(method, {})
    roll = rng.random()
    if roll < 0.45 and good:
        return good
    if roll < 0.8 and isinstance(good, dict) and good:
        broken = dict(good)
        key = rng.choice(list(broken))
        if rng.random() < 0.5:
            del broken[key]
        else:
            broken[key] = _junk(rng)
        return broken
    return _junk(rng)


GARBAGE = [b"not json\n", b"[1,2]\n", b"5\n", b'{"id":[1],"result":0}\n', b"{\n", b'"str"\n', b"\n", b"\xff\xfe\n"]


def test_acp_fuzz_every_request_is_answered_and_nothing_crashes(tmp_path: Path, isolated_home: Path) -> None:
    workspace = tmp_path / "ws"
    build_repo(workspace, [Commit("app", {"app.py": "x = 1\n"})])
    rng = random.Random(24)
    agent = AcpProcess(workspace, isolated_home)
    sessions: list[str] = []
    by_id: dict[str, Any] = {}
    unanswered: list[Any] = []
    sent = 0
    try:
        first = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}}
        agent.write(first)
        assert agent.wait_answers(["init"]) == []
        while sent < REQUESTS:
            ids = []
            for _ in range(BATCH):
                sent += 1
                method = rng.choice(METHODS)
                ident: Any = rng.choice([sent, f"s{sent}", -sent])
                message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
                if rng.random() < 0.95:
                    message["params"] = _params(rng, method, workspace, sessions)
                if rng.random() < 0.02:
                    message["jsonrpc"] = "1.0"
                agent.write(message)
                by_id[json.dumps(ident)] = message
                ids.append(ident)
                if rng.random() < 0.05:
                    agent.write(rng.choice(GARBAGE))
                if rng.random() < 0.05:  # a notification: never answered, must not break anything
                    agent.write(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/cancel",
                            "params": {"sessionId": rng.choice(sessions or ["x"])},
                        }
                    )
            unanswered += agent.wait_answers(ids)
            for ident in ids:
                result = agent.answers.get(json.dumps(ident), {}).get("result")
                if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                    sessions.append(result["sessionId"])
        assert agent.process.poll() is None, "the agent died"
        agent.write({"jsonrpc": "2.0", "id": "last", "method": "session/list", "params": {}})
        assert agent.wait_answers(["last"]) == []
    finally:
        assert agent.process.stdin is not None
        agent.process.stdin.close()
        code = agent.process.wait(timeout=GUARD)
    internal = [by_id.get(k) for k, a in agent.answers.items() if a.get("error", {}).get("code") == -32603]
    for message in internal[:5]:
        print("internal error for", json.dumps(message)[:300])
    texts = [json.dumps(a) for a in agent.answers.values()] + [json.dumps(e) for e in agent.null_errors]
    print(
        f"ACP fuzz: {sent} requests, {len(agent.answers) - 2} answered, {len(unanswered)} unanswered, "
        f"{len(agent.null_errors)} id-null errors, {len(internal)} internal errors, exit {code}"
    )
    assert sent >= REQUESTS
    assert [by_id[json.dumps(i)] for i in unanswered] == []
    assert agent.broken == []
    assert internal == []  # an internal error is a defect the fuzz found
    assert code == 0
    assert not [t for t in texts if any(marker in t for marker in TRACEBACK)]
    assert os.listdir(workspace) == [".git", "app.py"] or (workspace / "app.py").read_text() == "x = 1\n"
