"""Start-up cost: the server answering `initialize`, and the CLI's quick commands, beside floors measured in the
same run.

    python benchmarks/startup.py [--runs N] [--file PATH]

Floors: `python -c pass`, `python -c 'import git'` (what any git-backed CLI pays), and a bare pygls server
(nothing registered) started and initialised exactly like ours. Runs are interleaved (floor, ours, floor,
ours…) so a busy machine slows both alike; medians are printed. Goals (issue "One-way layers"): server ≤ 1.2×
bare pygls; `status` and `history` ≤ 1.5× `python -c 'import git'`.
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
BARE_SERVER = "from pygls.lsp.server import LanguageServer\nLanguageServer('bare', '0').start_io()\n"


def _frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def time_initialize(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning the server to reading its `initialize` response."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"processId": None, "rootUri": cwd.as_uri(), "capabilities": {}},
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_frame(init))
    proc.stdin.flush()
    length = 0
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv} exited before answering initialize")
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        elif line in (b"\r\n", b"\n"):
            break
    reply = json.loads(proc.stdout.read(length))
    elapsed = time.perf_counter() - started
    if reply.get("id") != 1 or "result" not in reply:
        raise RuntimeError(f"unexpected reply: {reply}")
    proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    return elapsed


def time_command(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--file",
        type=Path,
        default=ROOT / "server" / "nagent_lsp" / "headless" / "cli.py",
        help="a file in a git repository for `history` (default: one of ours)",
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="nagent-startup-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env["HOME"] = str(home)  # no user config, no key: the model-less start every user gets first
    cwd = args.file.resolve().parent
    cases: dict[str, tuple[str, list[str]]] = {
        "python -c pass": ("cmd", [PYTHON, "-c", "pass"]),
        "python -c 'import git'": ("cmd", [PYTHON, "-c", "import git"]),
        "bare pygls server: initialize answered": ("lsp", [PYTHON, "-c", BARE_SERVER]),
        "nagent-lsp server: initialize answered": ("lsp", [PYTHON, "-m", "nagent_lsp"]),
        "nagent-lsp --version": ("cmd", [PYTHON, "-m", "nagent_lsp", "--version"]),
        "nagent-lsp status": ("cmd", [PYTHON, "-m", "nagent_lsp", "status"]),
        "nagent-lsp history FILE": ("cmd", [PYTHON, "-m", "nagent_lsp", "history", str(args.file.resolve())]),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for kind, argv in cases.values():  # warm the OS page cache and .pyc files once
        (time_initialize if kind == "lsp" else time_command)(argv, env, cwd)
    for _ in range(args.runs):
        for name, (kind, argv) in cases.items():
            samples[name].append((time_initialize if kind == "lsp" else time_command)(argv, env, cwd))
    median = {name: statistics.median(values) for name, values in samples.items()}
    width = max(map(len, cases))
    print(f"start-up, median of {args.runs} interleaved runs ({os.cpu_count()} cores)")
    for name in cases:
        print(f"  {name:<{width}}  {median[name] * 1000:7.1f} ms")
    bare = median["bare pygls server: initialize answered"]
    git_floor = median["python -c 'import git'"]
    print("ratios against the floors measured in this run:")
    checks = [
        ("server / bare pygls server", median["nagent-lsp server: initialize answered"] / bare, 1.2),
        ("status / python -c 'import git'", median["nagent-lsp status"] / git_floor, 1.5),
        ("history / python -c 'import git'", median["nagent-lsp history FILE"] / git_floor, 1.5),
        ("--version / python -c pass", median["nagent-lsp --version"] / median["python -c pass"], None),
    ]
    for label, ratio, goal in checks:
        verdict = "" if goal is None else ("  (goal ≤ {:.1f}×: {})".format(goal, "met" if ratio <= goal else "NOT met"))
        print(f"  {label:<36} {ratio:5.2f}×{verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
