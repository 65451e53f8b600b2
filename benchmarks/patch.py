"""Patch a large file after a one-segment edit: `nagent-lsp patch` beside `cp` of the same file, same run.

What a user runs: `nagent-lsp split FILE`, edit one segment, `nagent-lsp patch index.json` — the CLI process reads the
index and the segments, checks the source, writes the file atomically and the diff under the state root. Floor: `cp`
of the file (read it whole, write it whole). Both are separate processes; wall time and peak RSS (the child's
ru_maxrss) are measured per run, interleaved, min/median/max of --repeat runs.
Goal (issue 29): patch <= 20x the floor's time, peak RSS <= 3x the file.
Usage: python benchmarks/patch.py [--size-mb 50] [--repeat 3] [--kind py]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from split import make_text  # noqa: E402

NAGENT = [sys.executable, "-m", "nagent_lsp"]


def run_child(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str, float]:
    """(seconds, peak RSS bytes of this child, stdout, CPU seconds). ru_maxrss of RUSAGE_CHILDREN is the largest
    child so far, so each measured child runs under its own short-lived `python -c` wrapper that reports its child's
    figures. CPU time (user + system) is printed beside the wall time: on a shared machine the load stretches wall
    times far more than CPU; the goal stays on wall time."""
    wrapper = (
        "import resource,subprocess,sys,time,json;t=time.perf_counter();"
        "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);d=time.perf_counter()-t;"
        "u=resource.getrusage(resource.RUSAGE_CHILDREN);r=u.ru_maxrss*1024;"
        "print(json.dumps({'s':d,'rss':r,'cpu':u.ru_utime+u.ru_stime,'rc':p.returncode,'out':p.stdout,"
        "'err':p.stderr[-2000:]}))"
    )
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, env=env, cwd=cwd)
    data = json.loads(done.stdout)
    if data["rc"] != 0:
        raise SystemExit(f"{' '.join(argv[:4])}… failed ({data['rc']}): {data['err']}")
    return data["s"], data["rss"], data["out"], data["cpu"]


def stats(values: list[float]) -> str:
    return f"{min(values):.3f}/{statistics.median(values):.3f}/{max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=50.0, help="file size in MB (10^6 bytes)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kind", default="py", choices=["py", "cpp", "json", "md", "txt"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        work = root / "ws"
        work.mkdir()
        home = root / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NAGENT_", "OPENAI_"))}
        env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parents[1] / "server"))
        source = work / f"big.{args.kind}"
        text = make_text(args.kind, int(args.size_mb * 1_000_000))
        original = text.encode()
        size = len(original)
        del text
        times: dict[str, list[float]] = {"cp": [], "patch": []}
        rss: dict[str, list[float]] = {"cp": [], "patch": []}
        cpu: dict[str, list[float]] = {"cp": [], "patch": []}
        for _ in range(args.repeat):
            source.write_bytes(original)
            _, _, out, _ = run_child([*NAGENT, "split", str(source)], env, work)
            split = json.loads(out)
            index_path = Path(split["indexPath"])
            seg = Path(split["segments"][len(split["segments"]) // 2]["path"])
            seg.write_text(seg.read_text() + "# an edit made in one segment\n")
            t, r, _, c = run_child(["cp", str(source), str(root / "copy")], env, work)
            times["cp"].append(t)
            rss["cp"].append(r)
            cpu["cp"].append(c)
            t, r, out, c = run_child([*NAGENT, "patch", str(index_path)], env, work)
            cpu["patch"].append(c)
            result = json.loads(out)
            if not result.get("applied"):
                raise SystemExit(f"patch did not apply: {out}")
            times["patch"].append(t)
            rss["patch"].append(r)
            shutil.rmtree(index_path.parent)
        report(times, rss, cpu, size, args.kind)


def report(
    times: dict[str, list[float]], rss: dict[str, list[float]], cpu: dict[str, list[float]], size: int, kind: str
) -> None:
    ratio = [p / c for p, c in zip(times["patch"], times["cp"], strict=True)]
    rss_ratio = [r / size for r in rss["patch"]]
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"file: {size / 1e6:.1f} MB ({kind}), {len(ratio)} interleaved runs, min/median/max")
    print(f"load average (1/5/15 min) at the end: {load} on {os.cpu_count()} cores")
    print(f"{'':<8}{'seconds':>22}{'CPU seconds':>22}{'peak RSS MB':>26}")
    for name in ("cp", "patch"):
        mb = stats([r / 1e6 for r in rss[name]])
        print(f"{name:<8}{stats(times[name]):>22}{stats(cpu[name]):>22}{mb:>26}")
    print(f"patch / cp time: {stats(ratio)}x   (goal <= 20x)")
    cpu_ratio = statistics.median(cpu["patch"]) / max(statistics.median(cpu["cp"]), 1e-3)
    print(f"patch / cp CPU time, ratio of medians: {cpu_ratio:.1f}x   (for reading the wall figures under load)")
    print(f"patch peak RSS / file size: {stats(rss_ratio)}x   (goal <= 3x)")
    met = statistics.median(ratio) <= 20 and statistics.median(rss_ratio) <= 3
    print(f"goal: {'met' if met else 'NOT met'} (medians)")


if __name__ == "__main__":
    main()
