"""History benchmark through the protocol: the real server (`python -m nagent_lsp`, a subprocess over stdio, isolated
HOME) and the CLI, on ANY git repository, each figure beside a floor measured in the same run on the same clone.

    python benchmarks/history.py --repo PATH --files FILE [FILE ...] [--other REV] [--server-rev REV]
                                 [--runs 3] [--hovers 200] [--moves 5] [--commits 100] [--skip LETTERS] [--keep]

(a synthetic repository: python benchmarks/make_large_repo.py /tmp/big --commits 1000000, which prints --files)

The repository is never changed: everything runs in a scratch `git clone --shared` of it (objects shared, nothing
copied), on a branch at the repository's HEAD, with the state root (the persisted index) in a temporary folder.
--server-rev runs that commit's server/ (exported with git archive) instead of the working tree's.

  a  index build: first hover → index ready              floors: `git log --name-only` and `--name-status -M` passes
     server RSS with the index: steady, and its peak while the index file is written (sampled every 10 ms)
  b  restart: server start → hover from the persisted index      floor: server start → a `nagent.status` answer
     CLI `nagent-lsp history FILE --json` from it                 floor: `nagent-lsp --version` (CLI start)
  c  first hover on each file before the index is ready           floor: one `git log -n 50 -- FILE`
     (and whether the card says it is partial)
  d  cold `nagent.history` (first request of a fresh server)      floor: nagent's sequence on the file,
     and the cold CLI                                                    `git log --follow -n 50` + 1 diff-tree/commit
  e  warm hover p50/p99                                            floor: `nagent.status` round trip p50/p99
  f  a new commit → hover shows it (median of --moves)             floor: git's part of an incremental update
  g  commit --amend; branch switch to --other and back             floor: (f) on the same server (git's part noted)
  h  server RSS over --commits new commits with hovers             floor: RSS before them
     (--switches: after each, to --other and back, every file hovered at each HEAD)

"Index ready" is read from `nagent.status` (a `history` field), a `$/progress` end, or an INFO log line, whichever
comes first; a server with none of them is timed by its persisted index file appearing (an upper bound), and the
report says which. Every wait has a time limit; a step the server does not support yet is reported, not hung on.
Pass-level figures alternate floor and ours `--runs` times and report the minimum. At the end: every row, then a
summary (one line per figure, per-file rows as ranges) for README's performance section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER_PATH = [ROOT / "server"]  # what PYTHONPATH gives the server and the CLI (--server-rev: an exported commit)
PYTHON = sys.executable
HISTORY_FORMAT = "--format=%x01%H%x1f%an%x1f%ae%x1f%at%x1f%s"
PARTIAL = re.compile(r"\d\+\s*commits?|building|partial|so far|indexing|in progress|not (?:yet )?ready|…", re.I)
READY_LOG = re.compile(r"(histor|index).*\b(ready|built|loaded|indexed)\b", re.I)
READY_STATES = {"ready", "loaded", "complete", "completed", "done", "current", "up-to-date", "uptodate"}
BUILDING_STATES = {"building", "loading", "indexing", "updating", "starting", "pending", "stale", "queued"}
POLL = 0.05


# -- results ---------------------------------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    label: str
    ours: float | None  # seconds (or MB for memory rows)
    floor: float | None
    floor_label: str
    note: str = ""
    unit: str = "s"
    group: str = ""  # rows of one figure measured per file share a group (one line of the summary)
    checks: dict[str, bool] = field(default_factory=dict)  # goals met, counted in the summary
    # Every run's figure: the row shows min/median/max, and its ours/floor (and so the ratio) are the medians.
    ours_runs: list[float] = field(default_factory=list)
    floor_runs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.ours_runs:
            self.ours = statistics.median(self.ours_runs)
        if self.floor_runs:
            self.floor = statistics.median(self.floor_runs)

    def ours_cell(self) -> str:
        return spread(self.ours_runs, self.unit) if len(self.ours_runs) > 1 else show(self.ours, self.unit)

    def floor_cell(self) -> str:
        return spread(self.floor_runs, self.unit) if len(self.floor_runs) > 1 else show(self.floor, self.unit)


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(
            f"  [{row.key}] {row.label}: {show(row.ours, row.unit)} | floor {show(row.floor, row.unit)} "
            f"({row.floor_label}) | {ratio(row)} {row.note}",
            flush=True,
        )

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def table(self) -> str:
        out = [
            "| | figure | ours (min/median/max) | floor (same run) | ratio (medians) | note |",
            "|---|---|---:|---|---:|---|",
        ]
        for r in self.rows:
            floor = f"{r.floor_cell()} {r.floor_label}" if r.floor is not None else r.floor_label
            out.append(f"| {r.key} | {r.label} | {r.ours_cell()} | {floor} | {ratio(r)} | {r.note} |")
        return "\n".join(out)

    def summary(self) -> str:
        """One line per figure: per-file rows become ranges (min–max) with their goals counted."""
        groups: dict[tuple[str, str], list[Row]] = {}
        for r in self.rows:
            groups.setdefault((r.key, r.group or r.label), []).append(r)
        out = ["| | figure | ours | floor | ratio | |", "|---|---|---:|---:|---:|---|"]
        for (key, label), rows in groups.items():
            if len(rows) == 1:
                r = rows[0]
                out.append(f"| {key} | {label} | {r.ours_cell()} | {r.floor_cell()} {r.floor_label} "
                           f"| {ratio(r)} | {r.note} |")  # fmt: skip
                continue
            unit = rows[0].unit
            ratios = [r.ours / r.floor for r in rows if r.ours is not None and r.floor]
            names: dict[str, list[bool]] = {}
            for r in rows:
                for name, ok in r.checks.items():
                    names.setdefault(name, []).append(ok)
            note = ", ".join(f"{name}: {sum(oks)}/{len(oks)}" for name, oks in names.items())
            failed = sum(r.ours is None for r in rows)
            note += f"{', ' if note else ''}{failed} failed" if failed else ""
            out.append(
                f"| {key} | {label} ({len(rows)} files) | {span([r.ours for r in rows], unit)} "
                f"| {span([r.floor for r in rows], unit)} {rows[0].floor_label} "
                f"| {f'{min(ratios):.2f}–{max(ratios):.2f}×' if ratios else '—'} | {note} |"
            )
        return "\n".join(out)


def show(value: float | None, unit: str = "s") -> str:
    if value is None:
        return "—"
    if unit == "MB":
        return f"{value:.0f} MB"
    if value < 1:
        return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"


def ratio(row: Row) -> str:
    if row.ours is None or not row.floor:
        return "—"
    return f"{row.ours / row.floor:.2f}×"


def span(values: list[float | None], unit: str) -> str:
    seen = [v for v in values if v is not None]
    return "—" if not seen else f"{show(min(seen), unit)}–{show(max(seen), unit)}"


def spread(values: list[float], unit: str) -> str:
    """min/median/max of a figure's runs."""
    return "/".join(show(v, unit) for v in (min(values), statistics.median(values), max(values)))


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


# -- git and processes -------------------------------------------------------------------------------------------


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_", "GIT_"))}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", LC_ALL="C.UTF-8")
    return env


class Git:
    def __init__(self, repo: Path, env: dict[str, str]):
        self.repo = repo
        self.env = env

    def out(self, *args: str | bytes, check: bool = True, timeout: float = 600) -> bytes:
        proc = subprocess.run(
            ["git", "-C", str(self.repo), *args], capture_output=True, env=self.env, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            cmd = " ".join(os.fsdecode(a) for a in args)
            raise RuntimeError(f"git {cmd} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def text(self, *args: str) -> str:
        return self.out(*args).decode("utf-8", "surrogateescape").strip()

    def ok(self, *args: str) -> bool:
        return subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, env=self.env).returncode == 0

    def drain(self, *args: str, timeout: float = 3600) -> float:
        """Wall time of a git command whose output is read and discarded (as a parser must read it)."""
        start = time.perf_counter()
        proc = subprocess.Popen(["git", "-C", str(self.repo), *args], stdout=subprocess.PIPE, env=self.env)
        assert proc.stdout is not None
        deadline = start + timeout
        while proc.stdout.read1(1 << 16):
            if time.perf_counter() > deadline:
                proc.kill()
                raise TimeoutError(f"git {' '.join(args)} took over {timeout:.0f}s")
        proc.wait()
        return time.perf_counter() - start


def nagent_sequence(git: Git, rel: str) -> tuple[float, int]:
    """nagent's own history of a file: `git log --follow -n 50`, then one `git diff-tree` per commit."""
    start = time.perf_counter()
    log = git.out(
        "log", "--follow", "-n", "50", "--date=short", "--format=%H%x1f%h%x1f%ad%x1f%an%x1f%ae%x1f%s", "--", rel
    )
    hashes = [row.split(b"\x1f")[0].decode() for row in log.splitlines() if row.count(b"\x1f") == 5]
    for sha in hashes:
        git.out("diff-tree", "--no-commit-id", "-r", sha)
    return time.perf_counter() - start, len(hashes)


def incremental_floor(git: Git, old: str, new: str) -> float:
    """git's part of bringing an index from `old` to `new` while reusing what they share: the ancestry test, the
    merge base and one `git log --name-status -M base..new` (nothing to read when `new` is an ancestor)."""

    def once() -> float:
        start = time.perf_counter()
        git.ok("merge-base", "--is-ancestor", old, new)
        base = git.text("merge-base", old, new)
        git.drain("log", "--name-status", "-M", HISTORY_FORMAT, f"{base}..{new}")
        return time.perf_counter() - start

    return min(once() for _ in range(3))


def warm_page_cache(git_dir: Path) -> None:
    """Read the object store once so no timed step pays a cold disk (the floors go first and would)."""
    dirs = [git_dir / "objects"]
    alternates = git_dir / "objects" / "info" / "alternates"
    if alternates.exists():
        dirs += [Path(line) for line in alternates.read_text().split() if line]
    for d in dirs:
        for path in (d / "pack").glob("*.pack") if (d / "pack").is_dir() else ():
            with open(path, "rb") as handle:
                while handle.read(1 << 22):
                    pass


# -- the server over stdio ---------------------------------------------------------------------------------------


class LspError(Exception):
    def __init__(self, error: dict[str, Any]):
        super().__init__(f"{error.get('code')}: {str(error.get('message', ''))[:300]}")
        self.error = error


async def _content_length(stdout: asyncio.StreamReader) -> int:
    """Read one message's headers; its Content-Length (0 when none was sent)."""
    length = 0
    while True:
        line = await stdout.readline()
        if not line:
            raise EOFError("the server closed its output")
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        elif line in (b"\r\n", b"\n"):
            return length


class Server:
    """`python -m nagent_lsp` as a subprocess, spoken to with a minimal JSON-RPC client (every notification kept with
    its arrival time; server requests answered the way a plain editor would). Latencies are taken here, at the
    client, with no LSP library of ours in the way."""

    def __init__(self, workspace: Path, home: Path, state: Path, log_file: Path):
        self.workspace = workspace
        self.home = home
        self.state = state
        self.log_file = log_file
        self.proc: asyncio.subprocess.Process | None = None
        self.spawned = 0.0
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[tuple[float, str, Any]] = []
        self.versions: dict[str, int] = {}
        self.reader: asyncio.Task | None = None
        self.dead: str | None = None
        self.stderr: Any = None

    @staticmethod
    def settings(state: Path) -> dict[str, Any]:
        return {"stateRoot": str(state), "history": {"summarize": False}}

    async def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / ".nagent" / "config.json"  # the CLI reads the same settings
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(self.settings(self.state)))
        env = git_env(self.home)
        env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(SERVER_PATH[0]), env.get("PYTHONPATH", "")]))
        self.spawned = time.perf_counter()
        self.stderr = open(self.log_file.with_name("stderr.txt"), "wb")  # closed in stop()
        self.proc = await asyncio.create_subprocess_exec(
            PYTHON,
            "-m",
            "nagent_lsp",
            "-v",
            "--log-file",
            str(self.log_file),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr,
            cwd=str(self.workspace),
            env=env,
            start_new_session=True,
            limit=1 << 24,
        )
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        stdout = self.proc.stdout
        try:
            while True:
                message = json.loads(await stdout.readexactly(await _content_length(stdout)))
                now = time.perf_counter()
                if "method" in message and "id" in message:
                    await self._answer(message)
                elif "method" in message:
                    self.events.append((now, message["method"], message.get("params")))
                elif message.get("id") in self.pending:
                    future = self.pending.pop(message["id"])
                    if not future.done():
                        future.set_result((now, message))
        except (EOFError, asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            self.dead = f"{type(exc).__name__}: {exc}"
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(RuntimeError(f"server gone ({self.dead}); log: {self.log_tail()}"))
            self.pending.clear()

    async def _answer(self, message: dict[str, Any]) -> None:
        method = message["method"]
        result: Any = None
        if method == "workspace/configuration":
            result = [self.settings(self.state) for _ in message.get("params", {}).get("items", [])]
        elif method == "workspace/applyEdit":
            result = {"applied": False, "failureReason": "benchmark client"}
        await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def _send(self, payload: dict[str, Any]) -> None:
        assert self.proc and self.proc.stdin
        body = json.dumps(payload).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any, timeout: float = 120) -> tuple[float, Any]:
        """(seconds at the client, result); LspError for an error answer, TimeoutError after `timeout`."""
        if self.dead:
            raise RuntimeError(f"server gone ({self.dead}); log: {self.log_tail()}")
        self.next_id += 1
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        start = time.perf_counter()
        await self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        try:
            arrived, message = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.pending.pop(self.next_id, None)
            raise TimeoutError(f"{method} not answered within {timeout:.0f}s") from None
        if "error" in message:
            raise LspError(message["error"])
        return arrived - start, message.get("result")

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self) -> float:
        uri = self.workspace.as_uri()
        capabilities = {
            "general": {"positionEncodings": ["utf-16"]},
            "window": {"workDoneProgress": True},
            "textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]}, "synchronization": {}},
            "workspace": {"workspaceFolders": True, "configuration": True},
        }
        params = {
            "processId": os.getpid(),
            "rootUri": uri,
            "capabilities": capabilities,
            "workspaceFolders": [{"uri": uri, "name": self.workspace.name}],
            "initializationOptions": self.settings(self.state),
        }
        await self.request("initialize", params, timeout=60)
        await self.notify("initialized", {})
        return time.perf_counter() - self.spawned

    async def open(self, path: Path) -> None:
        uri = path.as_uri()
        self.versions[uri] = 1
        item = {"uri": uri, "languageId": "plaintext", "version": 1, "text": read_text(path)}
        await self.notify("textDocument/didOpen", {"textDocument": item})

    async def reload(self, path: Path) -> None:
        """What an editor does when the file changed on disk under an open buffer (checkout, commit hooks...)."""
        uri = path.as_uri()
        self.versions[uri] = self.versions.get(uri, 1) + 1
        params = {
            "textDocument": {"uri": uri, "version": self.versions[uri]},
            "contentChanges": [{"text": read_text(path)}],
        }
        await self.notify("textDocument/didChange", params)

    async def hover(self, path: Path, line: int, timeout: float = 60) -> tuple[float, str | None]:
        params = {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": 0}}
        seconds, result = await self.request("textDocument/hover", params, timeout)
        return seconds, hover_text(result)

    async def command(self, name: str, *arguments: Any, timeout: float = 600) -> tuple[float, Any]:
        return await self.request("workspace/executeCommand", {"command": name, "arguments": list(arguments)}, timeout)

    def rss_mb(self) -> float | None:
        return self._status_mb("VmRSS")

    def hwm_mb(self) -> float | None:
        """Peak RSS of the server process so far (VmHWM)."""
        return self._status_mb("VmHWM")

    def _status_mb(self, field: str) -> float | None:
        if not self.proc:
            return None
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        found = re.search(rf"{field}:\s+(\d+) kB", status)
        return int(found.group(1)) / 1024 if found else None

    def log_tail(self, lines: int = 8) -> str:
        text = ""
        for name in (self.log_file, self.log_file.with_name("stderr.txt")):
            with contextlib.suppress(OSError):
                text += name.read_text(errors="replace")
        return " | ".join(text.splitlines()[-lines:]) or "(nothing logged)"

    def log_problems(self) -> list[str]:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if re.search(r"\bERROR\b|Traceback|Error:", line)]

    async def stop(self) -> None:
        if not self.proc:
            return
        if self.proc.returncode is None and not self.dead:
            with contextlib.suppress(Exception):
                await self.request("shutdown", None, timeout=10)
                await self.notify("exit", None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        if self.proc.returncode is None:  # our own child (and its git processes): its whole session
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 10)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # git children left behind, if any
        if self.stderr:
            self.stderr.close()
        if self.reader:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def hover_text(result: Any) -> str | None:
    if not result:
        return None
    contents = result.get("contents") if isinstance(result, dict) else result
    if isinstance(contents, dict):
        return str(contents.get("value", ""))
    if isinstance(contents, list):
        return "\n".join(c if isinstance(c, str) else str(c.get("value", "")) for c in contents)
    return str(contents)


def card_total(card: str | None) -> tuple[int | None, bool]:
    """The commit count a card states and whether it says it is partial."""
    if not card:
        return None, False
    found = re.search(r"(\d[\d,]*)(\+?)\s*commits?", card)
    total = int(found.group(1).replace(",", "")) if found else None
    return total, bool(PARTIAL.search(card))


def first_hash(card: str | None) -> str | None:
    found = re.search(r"`([0-9a-f]{7,40})`", card or "")
    return found.group(1) if found else None


# -- waiting for the index ---------------------------------------------------------------------------------------


def history_state(value: Any, root: str) -> str | None:  # noqa: C901, PLR0912  2026-11-27: reads every shape nagent.status has had, so old servers can be measured
    """'ready' / 'building' / None (unknown) from whatever shape `nagent.status`'s `history` field has."""
    if isinstance(value, list):
        mine = [v for v in value if isinstance(v, dict) and root in json.dumps(v)]
        states = [history_state(v, root) for v in (mine or value)]
        return "ready" if states and all(s == "ready" for s in states) else next((s for s in states if s), None)
    if isinstance(value, dict):
        if root in value and isinstance(value[root], dict):
            return history_state(value[root], root)
        if isinstance(value.get("ready"), bool):
            return "ready" if value["ready"] else "building"
        for key in ("state", "status", "phase", "index"):
            inner = value.get(key)
            if isinstance(inner, str):
                word = inner.lower()
                if word in READY_STATES:
                    return "ready"
                if word in BUILDING_STATES:
                    return "building"
                if word in ("failed", "error", "broken"):
                    return "failed"
            elif isinstance(inner, dict | list):
                found = history_state(inner, root)
                if found:
                    return found
        if isinstance(value.get("repositories"), list | dict):
            return history_state(value["repositories"], root)
    if isinstance(value, str):
        return "ready" if value.lower() in READY_STATES else "building" if value.lower() in BUILDING_STATES else None
    return None


async def wait_index_ready(server: Server, root: Path, timeout: float) -> tuple[float | None, str]:  # noqa: C901, PLR0912  2026-11-27: three signals of readiness (status, progress, log) polled in one loop
    """Seconds (perf_counter) when the index became ready, and how that was seen."""
    deadline = time.perf_counter() + timeout
    status_has_history: bool | None = None
    progress_tokens: set[Any] = set()
    seen_log = 0
    while time.perf_counter() < deadline:
        if server.dead:
            return None, f"server died: {server.dead}; log: {server.log_tail()}"
        for when, method, params in server.events:
            if method == "$/progress" and isinstance(params, dict):
                value = params.get("value") or {}
                if value.get("kind") == "begin" and re.search(r"histor|index", str(value.get("title", "")), re.I):
                    progress_tokens.add(json.dumps(params.get("token")))
                elif value.get("kind") == "end" and json.dumps(params.get("token")) in progress_tokens:
                    return when, "$/progress end"
        with contextlib.suppress(OSError):
            lines = server.log_file.read_text(errors="replace").splitlines()
            for line in lines[seen_log:]:
                if "INFO" in line and READY_LOG.search(line):
                    return time.perf_counter(), "INFO log line"
                if "ERROR" in line and re.search(r"histor|index", line, re.I):
                    return None, f"the server logged: {line.split(' ERROR ', 1)[-1][:200]}"
            seen_log = len(lines)
        if status_has_history is not False:
            try:
                _, status = await server.command("nagent.status", timeout=30)
            except (LspError, TimeoutError) as exc:
                return None, f"nagent.status failed: {exc}"
            status_has_history = isinstance(status, dict) and "history" in status
            state = history_state(status["history"], str(root)) if status_has_history else None
            if state == "ready":
                return time.perf_counter(), "nagent.status history"
            if state == "failed":
                return None, f"nagent.status history says it failed: {json.dumps(status['history'])[:300]}"
        if not status_has_history and not progress_tokens:
            found = persisted_index(server.state)
            if found is not None:
                return found, "persisted index file (upper bound: includes writing it)"
        await asyncio.sleep(POLL)
    return None, f"not ready within {timeout:.0f}s"


def persisted_index(state: Path) -> float | None:
    """perf_counter time at which an index file in the state root was last written, once it is stable."""
    candidates = [p for p in state.rglob("*") if p.is_file() and re.search(r"histor|index", str(p.relative_to(state)))]
    skip = ("summar", "file-index", ".lock", ".tmp", "conversation")
    candidates = [p for p in candidates if not any(word in str(p.relative_to(state)) for word in skip)]
    if not candidates:
        return None
    newest = max(p.stat().st_mtime for p in candidates)
    if time.time() - newest < 0.5:  # still being written
        return None
    return time.perf_counter() - (time.time() - newest)


async def wait_quiet(folder: Path, quiet: float = 1.0, timeout: float = 120) -> None:
    """Until nothing in `folder` has changed for `quiet` seconds (the index is on disk before a restart)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        times = [p.stat().st_mtime for p in folder.rglob("*") if p.is_file()]
        if not times or time.time() - max(times) >= quiet:
            return
        await asyncio.sleep(0.2)


async def sample_rss(server: Server, samples: list[float]) -> None:
    """RSS every 10 ms until cancelled (the peak while the index is written)."""
    while True:
        rss = server.rss_mb()
        if rss is not None:
            samples.append(rss)
        await asyncio.sleep(0.01)


async def hover_until(
    server: Server, path: Path, line: int, done: Callable[[str | None], bool], timeout: float
) -> tuple[float | None, str | None, int]:
    """Hover repeatedly (each as soon as the last answered) until `done(card)`; (seconds, last card, hovers)."""
    start = time.perf_counter()
    card: str | None = None
    count = 0
    while time.perf_counter() - start < timeout:
        _, card = await server.hover(path, line, timeout=max(1.0, timeout - (time.perf_counter() - start)))
        count += 1
        if done(card):
            return time.perf_counter() - start, card, count
        await asyncio.sleep(0.005)
    return None, card, count


# -- the benchmark -----------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, scratch: Path, tmp: Path, report: Report):
        self.args = args
        self.repo = scratch
        self.tmp = tmp
        self.report = report
        self.env = git_env(tmp / "git-home")
        (tmp / "git-home").mkdir(exist_ok=True)
        self.git = Git(scratch, self.env)
        self.files: list[str] = args.files
        self.paths = [scratch / f for f in self.files]
        self.lines = [max(0, len(read_text(p).splitlines()) // 2) for p in self.paths]
        self.fresh_count = 0
        self.build_state: Path | None = None  # state root holding the persisted index (a)
        self.build_home: Path | None = None
        self.reference: dict[str, str | None] = {}  # rel -> warm card
        self.build_seconds: float | None = None  # (a), for (b)'s note
        self.inc_seconds: float | None = None  # (f), for (g)'s notes

    def fresh(self, name: str, state: Path | None = None) -> Server:
        self.fresh_count += 1
        base = self.tmp / f"{self.fresh_count:02d}-{name}"
        base.mkdir()
        return Server(self.repo, base / "home", state or base / "state", base / "server.log")

    async def timed_server(self, server: Server, body: Callable[[Server], Any], timeout: float) -> Any:
        try:
            await server.start()
            return await asyncio.wait_for(body(server), timeout)
        finally:
            problems = server.log_problems()
            if problems:
                self.report.note(
                    f"server log ({server.log_file.parent.name}) has {len(problems)} error lines, "
                    f"first: {problems[0][:240]}"
                )
            await server.stop()

    # (a) ------------------------------------------------------------------------------------------------------
    async def build(self) -> None:
        g, a = self.git, self.args
        passes, passes_m, builds, how = [], [], [], ""
        rss = None
        steady_runs: list[float] = []
        writing_runs: list[float] = []
        hwm_runs: list[float] = []
        for run in range(a.build_runs or a.runs):
            passes.append(g.drain("log", "--name-only", "--no-renames", HISTORY_FORMAT, "HEAD"))
            passes_m.append(g.drain("log", "--name-status", "-M", HISTORY_FORMAT, "HEAD"))
            server = self.fresh("build")

            async def body(s: Server) -> tuple[float | None, str, float | None]:
                await s.initialize()
                start = time.perf_counter()
                await s.open(self.paths[0])
                await s.hover(self.paths[0], self.lines[0], timeout=a.timeout)  # the first request an editor sends
                ready, method = await wait_index_ready(s, self.repo, a.build_timeout)
                if ready is None:
                    return None, method, None
                memory = s.rss_mb()
                samples: list[float] = []
                sampler = asyncio.create_task(sample_rss(s, samples))  # the index is being written now
                complete = lambda card: card is not None and not card_total(card)[1]  # noqa: E731
                _, card, _ = await hover_until(s, self.paths[0], self.lines[0], complete, a.timeout)
                self.reference[self.files[0]] = card
                await wait_quiet(s.state)  # the index is on disk before the restart (b)
                sampler.cancel()
                await asyncio.sleep(1.0)
                steady = s.rss_mb()
                if steady is not None and samples:
                    steady_runs.append(steady)
                    writing_runs.append(max(samples))
                    hwm_runs.append(s.hwm_mb() or 0)
                return ready - start, method, memory

            seconds, how, rss = await self.timed_server(server, body, a.build_timeout + 300)
            if seconds is None:
                self.report.note(f"(a) run {run + 1}: index never reported ready: {how}")
                break
            builds.append(seconds)
            self.build_state, self.build_home = server.state, server.home
            print(
                f"    run {run + 1}: pass {passes[-1]:.2f}s, -M pass {passes_m[-1]:.2f}s, build {seconds:.2f}s",
                flush=True,
            )
        ours = statistics.median(builds) if builds else None
        note = f"ready seen by: {how}; RSS at ready {rss:.0f} MB" if rss else how
        self.report.add(
            Row("a", "index build: first hover → index ready", ours, None, "`git log --name-only` pass", note,
                ours_runs=builds, floor_runs=passes)
        )  # fmt: skip
        self.report.add(
            Row("a", "index build (same)", ours, None, "`git log --name-status -M` pass",
                ours_runs=builds, floor_runs=passes_m)
        )  # fmt: skip
        if steady_runs:
            self.report.add(
                Row("a", "server RSS with the index, steady (written, 1 s later)", None, None, "—",
                    f"build peak (VmHWM) {spread(hwm_runs, 'MB')}", unit="MB", ours_runs=steady_runs)
            )  # fmt: skip
            self.report.add(
                Row("a", "server RSS peak while the index is written", None, None, "steady RSS (row above)",
                    "sampled every 10 ms from ready until the file is quiet", unit="MB",
                    ours_runs=writing_runs, floor_runs=steady_runs)
            )  # fmt: skip
        self.build_seconds = ours

    # (b) ------------------------------------------------------------------------------------------------------
    async def restart(self) -> None:
        a = self.args
        if self.build_state is None:
            self.report.note("(b) skipped: no persisted index from (a)")
            return
        reference = self.reference.get(self.files[0])
        ref_total, _ = card_total(reference)

        async def bare(s: Server) -> float:
            await s.initialize()
            await s.command("nagent.status", timeout=60)
            return time.perf_counter() - s.spawned

        floors, ours = [], []
        last_card = None
        for _ in range(a.runs):
            floors.append(await self.timed_server(self.fresh("bare"), bare, 120))
            server = self.fresh("restart", state=self.build_state)
            server.home = self.build_home or server.home

            async def body(s: Server) -> float | None:
                nonlocal last_card
                await s.initialize()
                await s.open(self.paths[0])

                def from_index(card: str | None) -> bool:
                    total, partial = card_total(card)
                    return card is not None and not partial and (ref_total is None or total == ref_total)

                seconds, last_card, _ = await hover_until(s, self.paths[0], self.lines[0], from_index, a.timeout)
                return None if seconds is None else time.perf_counter() - s.spawned

            ours.append(await self.timed_server(server, body, a.timeout + 60))
        good = [x for x in ours if x is not None]
        note = "" if good else f"no hover matched the index's card (last: {first_line(last_card)})"
        if good and self.build_seconds:
            note = f"{statistics.median(good) / self.build_seconds:.2f}× the build (medians)"
        self.report.add(
            Row(
                "b",
                "restart: start → hover from persisted index",
                None,
                None,
                "start → `nagent.status` answered",
                note,
                ours_runs=good,
                floor_runs=floors,
            )
        )
        # the CLI from the persisted index
        cli, floor, err = [], [], ""
        for _ in range(a.runs):
            floor.append(self.cli(self.build_home, "--version")[0])
            seconds, result = self.cli(self.build_home, "history", str(self.paths[0]), "--json")
            cli.append(seconds)
            err = result if isinstance(result, str) else err
        self.report.add(
            Row(
                "b",
                f"CLI `history {self.files[0]} --json`, persisted index",
                None,
                None,
                "`nagent-lsp --version`",
                err,
                ours_runs=cli,
                floor_runs=floor,
            )
        )

    def cli(self, home: Path | None, *argv: str) -> tuple[float, dict | str]:
        assert home is not None
        env = git_env(home)
        env["PYTHONPATH"] = os.pathsep.join([str(SERVER_PATH[0]), env.get("PYTHONPATH", "")])
        start = time.perf_counter()
        proc = subprocess.run(
            [PYTHON, "-m", "nagent_lsp", *argv], capture_output=True, env=env, cwd=self.repo, timeout=self.args.timeout
        )
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            return seconds, f"exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[-200:]}"
        with contextlib.suppress(ValueError):
            return seconds, json.loads(proc.stdout)
        return seconds, {}

    # (c) ------------------------------------------------------------------------------------------------------
    async def first_hovers(self) -> None:
        a = self.args
        floors = {
            rel: min(self.git.drain("log", "-n", "50", HISTORY_FORMAT, "--", rel) for _ in range(a.runs))
            for rel in self.files
        }

        async def body(s: Server) -> list[tuple[str, float, str | None, str]]:
            await s.initialize()
            out = []
            for path, rel, line in zip(self.paths, self.files, self.lines, strict=True):
                await s.open(path)
                try:
                    seconds, card = await s.hover(path, line, timeout=a.timeout)
                except (LspError, TimeoutError) as exc:
                    out.append((rel, float("nan"), None, str(exc)))
                    continue
                _, status = await s.command("nagent.status", timeout=60)
                state = history_state(status.get("history"), str(self.repo)) if "history" in status else None
                out.append((rel, seconds, card, state or "?"))
            return out

        results = await self.timed_server(self.fresh("first-hover"), body, a.timeout * len(self.files) + 60)
        group = "first hover before the index"
        for rel, seconds, card, state in results:
            if seconds != seconds:  # nan: failed
                self.report.add(
                    Row("c", f"first hover `{rel}`", None, floors[rel], "`git log -n 50 -- FILE`", state, group=group)
                )
                continue
            _, partial = card_total(card)
            count = re.search(r"[\d,]+\+?\s*commits?", card or "")
            shown = "no card" if card is None else f"card says {count.group(0) if count else first_line(card)!r}"
            mark = "marked partial" if partial else "NOT marked partial"
            index = {"ready": "index already ready", "building": "index building"}.get(state, "index state unknown")
            goal = "≤ 300 ms ✓" if seconds <= 0.3 else "≤ 300 ms ✗"
            self.report.add(
                Row(
                    "c",
                    f"first hover `{rel}` before the index",
                    seconds,
                    floors[rel],
                    "`git log -n 50 -- FILE`",
                    f"{shown}, {mark}, {index}; {goal}",
                    group=group,
                    checks={"marked partial": partial, "≤ 300 ms": seconds <= 0.3},
                )
            )

    # (d) ------------------------------------------------------------------------------------------------------
    async def cold_history(self) -> None:
        a = self.args
        for path, rel in zip(self.paths, self.files, strict=True):
            floors, ours, cli = [], [], []
            n_nagent, n_ours, err, partial = 0, None, "", False
            for _ in range(a.runs):
                seconds, n_nagent = nagent_sequence(self.git, rel)
                floors.append(seconds)

                async def body(s: Server) -> tuple[float | None, Any]:
                    await s.initialize()
                    try:
                        return await s.command("nagent.history", {"uri": path.as_uri()}, timeout=a.timeout)
                    except (LspError, TimeoutError) as exc:
                        return None, str(exc)

                seconds, result = await self.timed_server(self.fresh("cold-history"), body, a.timeout + 60)
                if seconds is None:
                    err = f"failed: {result}"
                else:
                    ours.append(seconds)
                    n_ours = len(result.get("commits", [])) if isinstance(result, dict) else None
                    partial = isinstance(result, dict) and bool(result.get("partial"))
                seconds, out = self.cli(self.fresh_home("cold-cli"), "history", str(path), "--json")
                cli.append(seconds)
                err = err or (f"CLI {out}" if isinstance(out, str) else "")
            best = statistics.median(ours) if ours else None
            mid = statistics.median(floors)
            goal = ""
            if best is not None:
                goal = f"; ≥ 2× faster {'✓' if mid / best >= 2 else '✗'}"
            self.report.add(
                Row(
                    "d",
                    f"cold `nagent.history` `{rel}`",
                    best,
                    mid,
                    "nagent's sequence",
                    f"{n_ours}{' (partial)' if partial else ''} commits vs nagent's {n_nagent}{goal} {err}".strip(),
                    group="cold `nagent.history`",
                    ours_runs=ours,
                    floor_runs=floors,
                    checks={
                        "≥ 2× faster": best is not None and mid / best >= 2,
                        "as many commits": n_ours == n_nagent,
                    },
                )
            )
            self.report.add(
                Row("d", f"cold CLI `history {rel} --json`", None, None, "nagent's sequence",
                    group="cold CLI `history FILE --json`", ours_runs=cli, floor_runs=floors)
            )  # fmt: skip

    def fresh_home(self, name: str) -> Path:
        """A HOME whose settings point at a state root of its own (no persisted index): a cold CLI."""
        server = self.fresh(name)
        config = server.home / ".nagent" / "config.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(Server.settings(server.state)))
        return server.home

    # (e)-(h): one server, restarted on the persisted index ---------------------------------------------------
    async def live(self) -> None:
        a = self.args
        state = self.build_state
        server = self.fresh("live", state=state)
        if self.build_home:
            server.home = self.build_home

        async def body(s: Server) -> None:
            await s.initialize()
            for path in self.paths:
                await s.open(path)
            await s.hover(self.paths[0], self.lines[0], timeout=a.timeout)  # what loads the index, as in (a)
            ready, how = await wait_index_ready(s, self.repo, a.build_timeout)
            if ready is None:
                self.report.note(f"(e-h) the index never reported ready ({how}); measured anyway once cards settle")
            await self.warm(s)
            if "e" not in a.skip:
                await self.warm_hovers(s)
            if "f" not in a.skip or "g" not in a.skip:
                await self.moves(s)
            if "h" not in a.skip:
                await self.memory(s)

        await self.timed_server(server, body, a.build_timeout + a.timeout * 20 + a.commits * 120)

    async def warm(self, s: Server) -> None:
        """Hover each file until its card stops changing (blame and caches computed in the background)."""
        for path, rel, line in zip(self.paths, self.files, self.lines, strict=True):
            previous: list[str | None] = ["(none yet)"]

            def stable(card: str | None) -> bool:
                same = card == previous[0] and not card_total(card)[1]  # two None in a row: no card for it
                previous[0] = card
                return same

            async def settle(s: Server = s, path: Path = path, line: int = line) -> tuple[float | None, str | None]:
                seconds, card, _ = await hover_until(s, path, line, stable, self.args.timeout)
                return seconds, card

            seconds, card = await settle()
            if seconds is None:
                self.report.note(f"(e) `{rel}`: the card kept changing for {self.args.timeout:.0f}s")
            self.reference[rel] = card
            await asyncio.sleep(0.3)
            _, again = await s.hover(path, line)
            if again != card:
                self.reference[rel] = again

    async def warm_hovers(self, s: Server) -> None:
        hovers, statuses = [], []
        for i in range(self.args.hovers):
            k = i % len(self.paths)
            n = max(1, self.lines[k] * 2)
            seconds, _ = await s.hover(self.paths[k], (i * 37) % n)
            hovers.append(seconds)
            seconds, _ = await s.command("nagent.status")
            statuses.append(seconds)
        n = self.args.hovers
        self.report.add(
            Row(
                "e",
                f"warm hover p50 ({n} hovers, {len(self.paths)} files)",
                pct(hovers, 0.5),
                pct(statuses, 0.5),
                "`nagent.status` p50",
            )
        )
        self.report.add(Row("e", "warm hover p99", pct(hovers, 0.99), pct(statuses, 0.99), "`nagent.status` p99"))

    def commit(self, path: Path, message: str, amend: bool = False) -> str:
        if not amend:
            with open(path, "ab") as handle:
                handle.write(b"\n/* nagent benchmark: %s */\n" % message.encode())
        env = dict(self.env)
        env_b = {k.encode(): v.encode() for k, v in env.items()}
        env_b.update(
            {
                b"GIT_AUTHOR_NAME": b"Ren\xe9 Bench",
                b"GIT_AUTHOR_EMAIL": b"bench@example.org",
                b"GIT_COMMITTER_NAME": b"Bench",
                b"GIT_COMMITTER_EMAIL": b"bench@example.org",
            }
        )
        args = ["git", "-C", str(self.repo), "commit", "-q", "--no-verify"]
        args += ["--amend", "-m", message] if amend else ["-m", message, "--", str(path)]
        subprocess.run(args, env=env_b, check=True, capture_output=True, timeout=120)  # type: ignore[arg-type]
        return self.git.text("rev-parse", "HEAD")

    async def moves(self, s: Server) -> None:
        g, a = self.git, self.args
        path, line, rel = self.paths[0], self.lines[0], self.files[0]

        def shows(sha: str, not_sha: str | None = None) -> Callable[[str | None], bool]:
            return lambda card: bool(card) and f"`{sha[:7]}" in card and (not not_sha or f"`{not_sha[:7]}" not in card)

        async def after_move(sha_expected: str | None, changed: list[Path], avoid: str | None = None) -> float | None:
            for p in changed:
                await s.reload(p)
            done = (lambda c: first_hash(c) is None) if sha_expected is None else shows(sha_expected, avoid)
            seconds, card, _ = await hover_until(s, path, line, done, a.timeout)
            if seconds is None:
                self.report.note(
                    f"hover still showed {first_line(card)!r} after {a.timeout:.0f}s "
                    f"(expected {sha_expected and sha_expected[:7]})"
                )
            return seconds

        # (f): new commits, one at a time
        lat, floors = [], []
        for i in range(a.moves):
            old = g.text("rev-parse", "HEAD")
            new = self.commit(path, f"bench: new commit {i + 1}")
            lat.append(await after_move(new, [path]))
            floors.append(incremental_floor(g, old, new))
        seen = [x for x in lat if x is not None]
        self.inc_seconds = statistics.median(seen) if seen else None
        missed = f"; {len(lat) - len(seen)} never showed" if len(seen) < len(lat) else ""
        if "f" not in a.skip:
            label = f"new commit → hover shows it (median of {a.moves})"
            floor_label = "git's part: `merge-base --is-ancestor` + `log old..new`"
            self.report.add(
                Row("f", label, self.inc_seconds, statistics.median(floors), floor_label, missed.lstrip("; "))
            )
        if "g" in a.skip:
            return
        inc_label = "(f) on the same server"
        # (g): amend the last commit, then switch to --other and back, each `a.moves` times; floor: (f)
        amends, amend_git = [], []
        for i in range(a.moves):
            before = g.text("rev-parse", "HEAD")
            amended = self.commit(path, f"bench: new commit {a.moves}, amended {i + 1}", amend=True)
            amends.append(await after_move(amended, [], avoid=before))
            amend_git.append(git_part(g, before, amended))
        self.report.add(
            Row("g", "`commit --amend` → hover shows it", median(amends), self.inc_seconds, inc_label,
                f"git's part (`log new --not old`): {show(min(amend_git))}" + misses(amends))
        )  # fmt: skip
        head = g.text("rev-parse", "HEAD")
        other = g.text("rev-parse", "bench-other")
        theirs = g.text("log", "-1", "--format=%H", other, "--", rel) or None
        if theirs and theirs[:7] == head[:7]:
            self.report.note("(g) the file's last commit is the same on --other: the switch is not observable")
        names = g.out("diff", "--name-only", "-z", head, other).split(b"\0")
        changed = {Path(self.repo, os.fsdecode(p)) for p in names if p}
        aways, backs = [], []
        for _ in range(a.moves):
            g.out("checkout", "-q", "bench-other")
            aways.append(await after_move(theirs, [p for p in self.paths if p in changed and p.exists()]))
            g.out("checkout", "-q", "bench-main")
            backs.append(await after_move(head, [p for p in self.paths if p in changed]))
        away_git, back_git = git_part(g, head, other), git_part(g, other, head)
        target = self.args.other
        for label, ours, part in (
            (f"switch to `{target}` → hover shows its history", aways, away_git),
            ("switch back → hover shows HEAD's history", backs, back_git),
        ):
            self.report.add(
                Row("g", label + f" ({a.moves} moves)", median(ours), self.inc_seconds, inc_label,
                    switch_note(part, ours), ours_runs=[x for x in ours if x is not None])
            )  # fmt: skip

    async def memory(self, s: Server) -> None:
        a = self.args
        before = s.rss_mb()
        latencies, missed, samples = [], 0, []
        # commit to the files whose card shows commits (a file the server has no card for would never show one)
        targets = [k for k, rel in enumerate(self.files) if first_hash(self.reference.get(rel))] or [0]
        for i in range(a.commits):
            k = targets[i % len(targets)]
            sha = self.commit(self.paths[k], f"bench: commit {i + 1} of {a.commits}")
            await s.reload(self.paths[k])
            seconds, _, _ = await hover_until(s, self.paths[k], self.lines[k], lambda c: f"`{sha[:7]}" in (c or ""), 30)
            if seconds is None:
                missed += 1
            else:
                latencies.append(seconds)
            for j, path in enumerate(self.paths):
                if j != k:
                    await s.hover(path, self.lines[j])
            if a.switches:  # two more HEAD moves: to --other and back, every file hovered at each (issue 29)
                for branch in ("bench-other", "bench-main"):
                    self.git.out("checkout", "-q", branch)
                    for j, path in enumerate(self.paths):
                        if path.exists():
                            await s.reload(path)
                            await s.hover(path, self.lines[j])
            if (i + 1) % 10 == 0:
                samples.append(s.rss_mb() or 0)
                print(f"    {i + 1} commits: RSS {samples[-1]:.0f} MB", flush=True)
        after = s.rss_mb()
        note = "RSS every 10 commits: " + ", ".join(f"{x:.0f}" for x in samples)
        if latencies:
            note += f"; commit → hover p50 {show(pct(latencies, 0.5))}, max {show(max(latencies))}"
        if missed:
            note += f"; {missed} commits never showed within 30 s"
        self.report.add(
            Row(
                "h",
                f"server RSS after {a.commits} new commits with hovers"
                + (f" and {2 * a.commits} switches to --other and back" if a.switches else ""),
                after,
                before,
                "RSS before them",
                note,
                unit="MB",
            )
        )


def median(samples: list[float | None]) -> float | None:
    seen = [x for x in samples if x is not None]
    return statistics.median(seen) if seen else None


def switch_note(part: float, ours: list[float | None]) -> str:
    """git's part of a switch, the misses, and the first switch apart (no view kept yet: the worst case)."""
    note = f"git's part (`log new --not old`): {show(part)}" + misses(ours)
    return note + (f"; first {show(ours[0])}" if ours and ours[0] is not None else "")


def misses(samples: list[float | None]) -> str:
    missed = sum(x is None for x in samples)
    return f"; {missed} of {len(samples)} never showed" if missed else ""


def git_part(git: Git, old: str, new: str) -> float:
    """What git must read to bring an index from `old` to `new` keeping what they share: `log new --not old`."""
    return min(git.drain("log", "--name-status", "-M", HISTORY_FORMAT, new, "--not", old) for _ in range(3))


def first_line(card: str | None) -> str:
    return (card or "").splitlines()[0][:120] if card else str(card)


def prepare_scratch(source: Path, scratch: Path, other: str, env: dict[str, str]) -> str:
    src = Git(source, env)
    head = src.text("rev-parse", "--verify", "HEAD^{commit}")
    other_sha = src.text("rev-parse", "--verify", f"{other}^{{commit}}")
    subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", str(source), str(scratch)], check=True, env=env, timeout=600
    )
    g = Git(scratch, env)
    g.out("checkout", "-q", "-B", "bench-main", head)
    g.out("branch", "-q", "-f", "bench-other", other_sha)
    return head


async def run(args: argparse.Namespace) -> int:
    source = Path(args.repo).resolve()
    report = Report()
    keep = Path(tempfile.mkdtemp(prefix="nagent-history-bench-"))
    try:
        env = git_env(keep)
        scratch = keep / "repo"
        head = prepare_scratch(source, scratch, args.other, env)
        g = Git(scratch, env)
        missing = [f for f in args.files if not g.ok("cat-file", "-e", f"HEAD:{f}")]
        if missing:
            print(f"not in HEAD: {missing}", file=sys.stderr)
            return 2
        commits = int(g.text("rev-list", "--count", "HEAD"))
        merges = int(g.text("rev-list", "--merges", "--count", "HEAD"))
        tracked = len(g.out("ls-files", "-z").split(b"\0")) - 1
        rev = args.server_rev or "HEAD"
        server_rev = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%h %cI", rev], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = ""
        if args.server_rev:  # that commit's server/, exported: the working tree may be mid-edit
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", rev, "server"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(keep)], input=archive.stdout, check=True)
            SERVER_PATH[0] = keep / "server"
        else:
            dirty = subprocess.run(
                ["git", "-C", str(ROOT), "status", "--porcelain", "--", "server"], capture_output=True, text=True
            ).stdout.strip()
        print(f"repository {source} at {head[:10]}: {commits:,} commits ({merges:,} merges), {tracked:,} files")
        print(f"files: {' '.join(args.files)}; --other {args.other}")
        print(f"server: nagent-lsp {server_rev}{' + uncommitted changes under server/' if dirty else ''}")
        print(
            f"git {g.text('version').split()[-1]}, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
            f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M %Z')}, scratch {keep}",
            flush=True,
        )
        warm_page_cache(scratch / ".git")
        bench = Bench(args, scratch, keep, report)
        steps = [
            ("a", bench.build),
            ("b", bench.restart),
            ("c", bench.first_hovers),
            ("d", bench.cold_history),
            ("efgh", bench.live),
        ]
        for letters, step in steps:
            if all(x in args.skip for x in letters):
                continue
            print(f"-- ({', '.join(letters)})", flush=True)
            try:
                await step()
            except Exception as exc:  # noqa: BLE001 - report the step and go on to the next
                report.note(f"({letters}) stopped: {type(exc).__name__}: {exc}")
    finally:
        print()
        print(report.table())
        print()
        print(report.summary())
        for text in report.notes:
            print(f"- {text}")
        if args.keep:
            print(f"kept {keep}")
        else:
            shutil.rmtree(keep, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="any git repository (not modified: a scratch clone is used)")
    ap.add_argument("--files", nargs="+", required=True, help="files to measure, relative to the repository")
    ap.add_argument("--other", default="HEAD~300", help="revision for the branch switch in (g) (default HEAD~300)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each pass-level figure (minimum reported)")
    ap.add_argument("--build-runs", type=int, help="runs of (a) when not --runs (a 1M-commit build takes minutes)")
    ap.add_argument("--hovers", type=int, default=200, help="warm hovers for (e)")
    ap.add_argument("--commits", type=int, default=100, help="new commits for (h)")
    ap.add_argument("--moves", type=int, default=5, help="new commits for (f), amends and switches for (g)")
    ap.add_argument("--switches", action="store_true", help="(h): switch to --other and back after each commit")
    ap.add_argument("--timeout", type=float, default=60, help="seconds any one answer may take")
    ap.add_argument("--build-timeout", type=float, default=1800, help="seconds the index build may take")
    ap.add_argument("--skip", default="", help="letters of steps to skip, e.g. 'dh'")
    ap.add_argument("--server-rev", help="run this commit's server/ (exported), not the working tree's")
    ap.add_argument("--keep", action="store_true", help="keep the scratch clone, state roots and server logs")
    args = ap.parse_args()
    args.files = [f.rstrip("/") for f in args.files]
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
