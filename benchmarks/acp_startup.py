"""ACP start-up: `nagent-lsp acp` spawned → its `initialize` answered, beside a bare ACP SDK agent (nothing but
`initialize`, run with `run_agent`) and beside `nagent-lsp` LSP start → `initialize`, all in the same run.

    python benchmarks/acp_startup.py [--runs N]

Runs are interleaved (bare, acp, lsp, bare, acp, lsp…) so a busy machine slows all alike; min/median/max are
printed. Goals (issue 24): acp ≤ 1.2× the bare SDK agent; LSP start does not get slower with ACP in the binary
(the SDK is imported only in `acp` mode: compare with benchmarks/startup.py's figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BARE_AGENT = """
import asyncio
from acp import run_agent
from acp.schema import InitializeResponse

class Bare:
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        return InitializeResponse(protocol_version=1)

asyncio.run(run_agent(Bare()))
"""


def time_acp(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning an ACP agent to reading its `initialize` answer (one JSON line)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv} exited before answering initialize")
        reply = json.loads(line)
        if reply.get("id") == 1:
            break
    elapsed = time.perf_counter() - started
    if "result" not in reply:
        raise RuntimeError(f"unexpected reply: {reply}")
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.startup import time_initialize

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "server"), env.get("PYTHONPATH", "")]))
    env["HOME"] = tempfile.mkdtemp(prefix="acp-bench-home-")
    cwd = Path(tempfile.mkdtemp(prefix="acp-bench-ws-"))
    bare = Path(cwd / "bare_agent.py")
    bare.write_text(BARE_AGENT, encoding="utf-8")
    subjects = {
        "bare ACP SDK agent": lambda: time_acp([PYTHON, str(bare)], env, cwd),
        "nagent-lsp acp": lambda: time_acp([PYTHON, "-m", "nagent_lsp", "acp"], env, cwd),
        "nagent-lsp (LSP)": lambda: time_initialize([PYTHON, "-m", "nagent_lsp"], env, cwd),
    }
    for measure in subjects.values():  # warm the file cache once
        measure()
    times: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(args.runs):
        for name, measure in subjects.items():
            times[name].append(measure())
    print(f"start → initialize answered, {args.runs} interleaved runs (seconds: min / median / max)")
    for name, values in times.items():
        print(f"  {name:<22} {min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}")
    ratio = statistics.median(times["nagent-lsp acp"]) / statistics.median(times["bare ACP SDK agent"])
    print(f"  acp / bare SDK agent: {ratio:.2f}× (goal ≤ 1.2×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
