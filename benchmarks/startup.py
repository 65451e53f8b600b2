"""Start-up cost: the server answering `initialize`, and the CLI's quick commands, beside floors measured in the
same run, with a NORMAL install as users get it.

    python benchmarks/startup.py [--runs N] [--file PATH] [--venv PATH | --here]

By default the package is built into a wheel once and installed (`pip install`, dependencies from pip's cache)
into a scratch virtual environment, and everything runs from there: the `nagent-lsp` console script and that
venv's Python for the floors. An editable install (the repository's .venv) adds a path finder to every import and
is not what users run; `--here` measures the current interpreter anyway, `--venv PATH` reuses an environment made
before (it is refreshed with the current tree).

Floors: `python -c pass`, `python -c 'import git'` (what any git-backed CLI pays), and a bare pygls server
(nothing registered) started and initialised exactly like ours. Runs are interleaved (floor, ours, floor,
ours…) so a busy machine slows both alike; min/median/max are printed, ratios are of medians, with the load
average. Goals (issue 29): server ≤ 1.2× bare pygls; `status` ≤ 1.5× `python -c 'import git'`. The CLI history's
own floor (`--version` + one `git log`) is benchmarks/cli_history.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_initialize(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Seconds from spawning the server to reading its `initialize` response, and the CPU seconds the process used
    in its whole life (start, initialize, shutdown, exit: a figure a busy machine does not stretch)."""
    cpu = _children_cpu()
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
        proc.wait()
    return elapsed, _children_cpu() - cpu


def time_command(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    cpu = _children_cpu()
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started, _children_cpu() - cpu


def install(venv: Path, fresh: bool) -> Path:
    """A normal (non-editable) install of this tree into `venv`; returns its Python."""
    python = venv / "bin" / "python"
    if fresh or not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    wheels = Path(tempfile.mkdtemp(prefix="nagent-wheel-"))
    try:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(
            [str(python), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)], check=True, **quiet
        )
        wheel = next(wheels.glob("nagent_lsp-*.whl"))
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(wheel)],
            check=True,
            **quiet,
        )
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, **quiet)  # dependencies
    finally:
        shutil.rmtree(wheels, ignore_errors=True)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--file",
        type=Path,
        default=ROOT / "server" / "nagent_lsp" / "headless" / "cli.py",
        help="a file in a git repository for `history` (default: one of ours)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--venv", type=Path, default=None, help="install into (and reuse) this virtual environment")
    where.add_argument("--here", action="store_true", help="measure the current interpreter (editable install)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="nagent-startup-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_", "PYTHONDONTWRITEBYTECODE"))}
    env["HOME"] = str(home)  # no user config, no key: the model-less start every user gets first
    cwd = args.file.resolve().parent
    if args.here:
        python, how = PYTHON, "the current interpreter"
        nagent = [PYTHON, "-m", "nagent_lsp"]
    else:
        venv = args.venv or home / "venv"
        python, how = install(venv, fresh=args.venv is None), f"a normal install in {venv}"
        nagent = [str(python.parent / "nagent-lsp")]
        env.pop("PYTHONPATH", None)
    cases: dict[str, tuple[str, list[str]]] = {
        "python -c pass": ("cmd", [str(python), "-c", "pass"]),
        "python -c 'import git'": ("cmd", [str(python), "-c", "import git"]),
        "bare pygls server: initialize answered": ("lsp", [str(python), "-c", BARE_SERVER]),
        "nagent-lsp server: initialize answered": ("lsp", nagent),
        "nagent-lsp --version": ("cmd", [*nagent, "--version"]),
        "nagent-lsp status": ("cmd", [*nagent, "status"]),
        "nagent-lsp history FILE": ("cmd", [*nagent, "history", str(args.file.resolve())]),
    }
    if subprocess.run([str(python), "-c", "import git"], capture_output=True).returncode:
        del cases["python -c 'import git'"]  # GitPython is no dependency any more: that floor exists only if installed
    samples: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for kind, argv in cases.values():  # warm the OS page cache and .pyc files once
        (time_initialize if kind == "lsp" else time_command)(argv, env, cwd)
    for _ in range(args.runs):
        for name, (kind, argv) in cases.items():
            wall, used = (time_initialize if kind == "lsp" else time_command)(argv, env, cwd)
            samples[name].append(wall)
            cpu[name].append(used)
    median = {name: statistics.median(values) for name, values in samples.items()}
    width = max(map(len, cases))
    print(
        f"start-up with {how}: min / median / max of {args.runs} interleaved runs ({os.cpu_count()} cores,"
        f" load {os.getloadavg()[0]:.2f})"
    )
    for name in cases:
        low, high = min(samples[name]), max(samples[name])
        print(
            f"  {name:<{width}}  {low * 1000:7.1f} / {median[name] * 1000:7.1f} / {high * 1000:7.1f} ms"
            f"   cpu {statistics.median(cpu[name]) * 1000:7.1f} ms"
        )
    bare = median["bare pygls server: initialize answered"]
    print("ratios against the floors measured in this run:")
    checks = [
        ("server / bare pygls server", median["nagent-lsp server: initialize answered"] / bare, 1.2),
        ("--version / python -c pass", median["nagent-lsp --version"] / median["python -c pass"], None),
    ]
    git_floor = median.get("python -c 'import git'")
    if git_floor:
        checks.insert(1, ("status / python -c 'import git'", median["nagent-lsp status"] / git_floor, 1.5))
        checks.insert(2, ("history / python -c 'import git'", median["nagent-lsp history FILE"] / git_floor, None))
    bare_cpu = statistics.median(cpu["bare pygls server: initialize answered"])
    ours_cpu = statistics.median(cpu["nagent-lsp server: initialize answered"])
    checks.insert(1, ("server / bare pygls, CPU of the whole run", ours_cpu / bare_cpu, None))
    for label, ratio, goal in checks:
        verdict = "" if goal is None else ("  (goal ≤ {:.1f}×: {})".format(goal, "met" if ratio <= goal else "NOT met"))
        print(f"  {label:<42} {ratio:5.2f}×{verdict}")
    shutil.rmtree(home, ignore_errors=True)  # the scratch HOME (and the venv made in it, unless --venv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
