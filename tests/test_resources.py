"""Bounded resources (issue 22): one server answering thousands of commands keeps its memory flat and its table
of running requests empty of finished ones.

pygls 2.1 ran `workspace/executeCommand` through its generator path, which files each command's inner task under
a fresh id and never removes it: every command kept its finished task and its result for the life of the server
(4 × 3,000 `nagent.status`: RSS 55.5 → 82.7 MB). Requests go out 50 at a time; nothing here depends on timing:
each batch is waited for by its answers, and memory is read from /proc after a warm-up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.abuse.rawserver import RawServer, server_env
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.probed_server import PROBE

ROOT = Path(__file__).resolve().parents[1]
IN_FLIGHT = 50
WARM_UP = 400  # of each kind: the interpreter's and the allocator's pools fill up before the first reading
COUNT = 5000  # of each kind after the first reading
MAX_GROWTH = 0.05


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/<pid>/status")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    ws, home = tmp_path / "ws", tmp_path / "home"
    home.mkdir(exist_ok=True)
    build_repo(ws, [Commit("add app", {"app.py": "print('hi')\n"})])
    raw = RawServer(ws, server_env(home, {"PYTHONPATH": str(ROOT)}), verbose=False)
    raw.argv = [sys.executable, "-m", "tests.harness.probed_server"]
    raw.start()
    answer = raw.call("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": {}})
    assert answer is not None and "result" in answer, answer
    raw.notify("initialized", {})
    yield raw
    assert raw.stop() == 0


def run_batches(server: RawServer, total: int, name: str, argument: dict[str, Any], expect_error: bool) -> None:
    sent = 0
    while sent < total:
        ids = [server.command(name, argument) for _ in range(min(IN_FLIGHT, total - sent))]
        sent += len(ids)
        assert server.wait_for(ids) == [], f"{name}: unanswered after {sent} commands"
        for msg_id in ids:
            answer = server.answer(msg_id)
            assert answer is not None and ("error" in answer) == expect_error, answer
            server.received.answers.pop(f"int:{msg_id}", None)  # the client keeps nothing either
    server.received.messages.clear()


def request_table(server: RawServer) -> dict[str, int]:
    answer = server.call(PROBE, {})
    assert answer is not None and "result" in answer, answer
    return answer["result"]


def test_memory_stays_flat_over_thousands_of_commands(server: RawServer, tmp_path: Path) -> None:
    missing = {"uri": (tmp_path / "ws" / "missing.py").as_uri()}  # nagent.split fails: no such file
    run_batches(server, WARM_UP, "nagent.status", {}, expect_error=False)
    run_batches(server, WARM_UP, "nagent.split", missing, expect_error=True)
    before = rss_kib(server.pid)

    run_batches(server, COUNT, "nagent.status", {}, expect_error=False)
    after_status = rss_kib(server.pid)
    run_batches(server, COUNT, "nagent.split", missing, expect_error=True)
    after = rss_kib(server.pid)

    table = request_table(server)
    assert table["finished"] == 0, f"finished requests kept in pygls' request table: {table}"
    growth = (after - before) / before
    assert growth <= MAX_GROWTH, (
        f"RSS grew {growth:.1%} over {2 * COUNT} commands: {before} KiB → {after_status} KiB after "
        f"{COUNT} nagent.status → {after} KiB after {COUNT} failing nagent.split"
    )
