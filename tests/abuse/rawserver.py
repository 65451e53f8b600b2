"""One real nagent-lsp process driven over raw stdio, frames written by hand so that anything can be sent.

No LSP library on this side: `send_bytes` writes whatever it is given (garbage, broken headers, wrong lengths),
`request` writes a well-framed JSON-RPC request with any envelope. A reader thread parses every frame the
server writes (strictly: a broken frame from the server is itself a finding), keeps every raw byte for the
canary scan, and answers the server's own requests the way a minimal editor would. Waiting is event-driven
(a condition variable); the guard timeouts only turn a hang into a finding.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MISSING: Any = object()  # "leave this member out of the envelope"
GUARD = 120.0  # seconds a wait may take before what it waits for counts as never answered


def id_key(value: Any) -> str:
    """A response id as a comparable key that keeps JSON types apart (1, 1.0 and "1" are different ids)."""
    return f"{type(value).__name__}:{json.dumps(value)}"


def frame(body: bytes | str | Any) -> bytes:
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@dataclass
class Received:
    messages: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # id_key -> the response
    null_id_errors: list[dict[str, Any]] = field(default_factory=list)
    log_messages: list[str] = field(default_factory=list)  # window/logMessage and window/showMessage texts
    progress: list[dict[str, Any]] = field(default_factory=list)
    server_requests: list[str] = field(default_factory=list)
    broken_frames: list[str] = field(default_factory=list)


class RawServer:
    def __init__(self, cwd: Path, env: dict[str, str], log_file: Path | None = None, verbose: bool = True):
        self.cwd = cwd
        self.env = env
        self.log_file = log_file
        self.stderr_path = cwd.parent / f"{cwd.name}.stderr.txt"
        argv = [sys.executable, "-m", "nagent_lsp"]
        if log_file is not None:
            argv += ["--log-file", str(log_file)]
        if verbose:
            argv.append("-v")
        self.argv = argv
        self.received = Received()
        self.raw = bytearray()  # every byte the server wrote on stdout
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.settings_reply: Any = None  # what workspace/configuration is answered with (per item)
        self._replies: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.stderr_lines: list[str] = []
        self._threads: list[threading.Thread] = []

    # -- process --------------------------------------------------------------------------------------------

    def start(self) -> RawServer:
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
        )
        self._threads = [
            threading.Thread(target=self._read, name="abuse-reader", daemon=True),
            threading.Thread(target=self._read_stderr, name="abuse-stderr", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        threading.Thread(target=self._write_replies, name="abuse-replier", daemon=True).start()
        threading.Thread(target=self._reap, name="abuse-reaper", daemon=True).start()
        return self

    def _reap(self) -> None:
        assert self.process is not None
        self.process.wait()
        self._wake()  # whoever waits for an answer learns the server is gone

    def _write_replies(self) -> None:
        while (data := self._replies.get()) is not None:
            self.send_bytes(data)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, guard: float = 30.0) -> int | None:
        """shutdown + exit; the exit code (None if it had to be killed)."""
        code: int | None = None
        if self.alive():
            shutdown = self.request("shutdown", MISSING)
            self.wait_for([shutdown], guard)
            self.notify("exit", MISSING)
            assert self.process is not None
            try:
                code = self.process.wait(guard)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        elif self.process is not None:
            code = self.process.returncode
        if self.process is not None and self.process.stdin:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        self._replies.put(None)
        for thread in self._threads:  # the process is gone: its pipes reach end of file
            thread.join(guard)
        with self._cond:
            self._stderr.close()
        return code

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace") if self.stderr_path.exists() else ""

    def peak_rss_kib(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    # -- sending --------------------------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        assert self.process is not None and self.process.stdin is not None
        with self._write_lock:
            try:
                self.process.stdin.write(data)
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the server is gone: what was sent counts as unanswered

    def new_id(self) -> int:
        with self._cond:
            self._next_id += 1
            return self._next_id

    def envelope(self, method: Any, params: Any = MISSING, msg_id: Any = MISSING, **extra: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        if msg_id is not MISSING:
            message["id"] = msg_id
        if method is not MISSING:
            message["method"] = method
        if params is not MISSING:
            message["params"] = params
        message.update(extra)
        return message

    def request(self, method: Any, params: Any = MISSING, msg_id: Any = MISSING) -> Any:
        """Send a request; returns its id (a fresh integer unless given)."""
        if msg_id is MISSING:
            msg_id = self.new_id()
        self.send_bytes(frame(self.envelope(method, params, msg_id)))
        return msg_id

    def notify(self, method: Any, params: Any = MISSING) -> None:
        self.send_bytes(frame(self.envelope(method, params)))

    def command(self, name: str, *arguments: Any) -> Any:
        return self.request("workspace/executeCommand", {"command": name, "arguments": list(arguments)})

    # -- waiting --------------------------------------------------------------------------------------------

    def answered(self, msg_id: Any) -> bool:
        with self._cond:
            return id_key(msg_id) in self.received.answers

    def answer(self, msg_id: Any) -> dict[str, Any] | None:
        with self._cond:
            return self.received.answers.get(id_key(msg_id))

    def wait_for(self, ids: Iterable[Any], guard: float = GUARD) -> list[Any]:
        """Wait until every id is answered (or the server died, or `guard` passed); returns those still unanswered."""
        keys = {id_key(i): i for i in ids}
        with self._cond:
            self._cond.wait_for(
                lambda: all(k in self.received.answers for k in keys) or not self.alive(),
                timeout=guard,
            )
            return [value for key, value in keys.items() if key not in self.received.answers]

    def call(self, method: str, params: Any = MISSING, guard: float = GUARD) -> dict[str, Any] | None:
        msg_id = self.request(method, params)
        self.wait_for([msg_id], guard)
        return self.answer(msg_id)

    def run_command(self, name: str, *arguments: Any, guard: float = GUARD) -> dict[str, Any] | None:
        msg_id = self.command(name, *arguments)
        self.wait_for([msg_id], guard)
        return self.answer(msg_id)

    def wait_until(self, predicate: Any, guard: float = GUARD) -> bool:
        """Wait until `predicate(received)` holds, re-checked whenever a message arrives."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.received) or not self.alive(), timeout=guard) and bool(
                predicate(self.received)
            )

    # -- reading --------------------------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self._wake()
                    return
                self.raw += line
                if not line.strip():
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        self._broken(f"bad Content-Length header {line!r}")
                elif not value:
                    self._broken(f"not a header: {line[:80]!r}")
            if length is None:
                self._broken("a header block without Content-Length")
                continue
            body = stream.read(length)
            self.raw += body
            if len(body) < length:
                self._wake()
                return
            try:
                message = json.loads(body)
            except ValueError:
                self._broken(f"a body that is not JSON: {body[:80]!r}")
                continue
            self._handle(message)

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in iter(self.process.stderr.readline, b""):
            with self._cond:
                if not self._stderr.closed:
                    self._stderr.write(line)
                    self._stderr.flush()
                self.stderr_lines.append(line.decode("utf-8", "replace"))
                self._cond.notify_all()
        self._wake()

    def wait_for_stderr(self, needle: str, guard: float = GUARD) -> bool:
        """Wait until a line holding `needle` appears on the server's stderr (its log, when no --log-file)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: any(needle in line for line in self.stderr_lines) or not self.alive(), timeout=guard
            ) and any(needle in line for line in self.stderr_lines)

    def _broken(self, what: str) -> None:
        with self._cond:
            self.received.broken_frames.append(what)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _handle(self, message: Any) -> None:
        reply = None
        with self._cond:
            self.received.messages.append(message)
            if not isinstance(message, dict):
                self.received.broken_frames.append(f"a message that is not an object: {str(message)[:80]}")
            elif "method" in message and "id" in message:
                self.received.server_requests.append(str(message["method"]))
                reply = self._reply_to(message)
            elif "method" in message:
                params = message.get("params") or {}
                if message["method"] in ("window/logMessage", "window/showMessage"):
                    self.received.log_messages.append(str(params.get("message", "")))
                elif message["method"] == "$/progress":
                    self.received.progress.append(params)
            elif "id" in message:
                if message["id"] is None:
                    self.received.null_id_errors.append(message)
                else:
                    self.received.answers[id_key(message["id"])] = message
            self._cond.notify_all()
        if reply is not None:
            self._replies.put(frame(reply))  # written by another thread: this one must keep reading

    def _reply_to(self, message: dict[str, Any]) -> dict[str, Any]:
        """What a minimal editor answers to the server's own requests."""
        method, params = message["method"], message.get("params") or {}
        result: Any = None
        if method == "workspace/configuration":
            result = [self.settings_reply for _ in params.get("items", [])]
        elif method == "workspace/applyEdit":
            result = {"applied": False, "failureReason": "the abuse client applies no edits"}
        elif method == "window/showDocument":
            result = {"success": False}
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def server_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env.update({"HOME": str(home), "PYTHONUNBUFFERED": "1", "GIT_CONFIG_NOSYSTEM": "1"})
    env.update(extra)
    return env
