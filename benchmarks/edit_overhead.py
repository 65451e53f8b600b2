"""The server's own cost of an edit: request → workspace/applyEdit, model latency excluded.

Runs the real server (subprocess, VS Code capabilities) in a real git repository against the local
OpenAI-compatible test server, which answers instantly with a <nagent-write> of the file with three lines
changed, then a <nagent-response>. For files of 1k, 10k and 50k lines it prints the median time from sending
`nagent.edit` to the client receiving the applyEdit, minus the model calls as the server timed them (its
log's "model call took" lines: the SDK's HTTP round trip and JSON of the whole conversation), beside the
floor measured in the same run (each run starts from a cleared conversation): just diffing the two texts into
minimal edits in-process
(`nagent_lsp.text.edits.minimal_edits`, what any minimal-edit delivery must do at least).

    .venv/bin/python -m benchmarks.edit_overhead [--runs 5] [--lines 1000,10000,50000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.fake_openai import FakeOpenAI  # noqa: E402
from tests.harness.gitrepo import Commit, build_repo  # noqa: E402
from tests.harness.lsp import open_editor  # noqa: E402


def make_text(lines: int) -> str:
    return "".join(
        f"def function_{i}(x):\n    return x * {i}  # line {i}\n" if i % 2 == 0 else "\n" for i in range(lines)
    )


def modify(text: str) -> str:
    lines = text.splitlines(keepends=True)
    for at in (len(lines) // 4, len(lines) // 2, (3 * len(lines)) // 4):
        lines[at] = lines[at].rstrip("\n") + "  # changed by the model\n"
    return "".join(lines)


def floor_seconds(old: str, new: str, runs: int) -> float:
    from nagent_lsp.text.edits import minimal_edits

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        minimal_edits(old, new, "utf-16")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def model_ms(log_file: Path, seen: int) -> tuple[float, int]:
    lines = log_file.read_text().splitlines() if log_file.exists() else []
    total = sum(float(m.group(1)) for line in lines[seen:] if (m := re.search(r"model call took ([\d.]+) ms", line)))
    return total, len(lines)


async def measure(lines: int, runs: int, base: Path) -> tuple[float, float, int]:
    work = base / f"ws{lines}"
    old = make_text(lines)
    new = modify(old)
    build_repo(work, [Commit("init", {"big.py": old})])
    target = work / "big.py"

    def responder(request):
        last = request.messages[-1]["content"]
        return (
            "<nagent-response>done</nagent-response>"
            if "<nagent-write-result" in last
            else f'<nagent-write path="{target}">\n{new}</nagent-write>'
        )

    fake = FakeOpenAI(responder=responder)
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-bench", "NAGENT_MODEL": "bench"}
    samples = []
    try:
        log_file = base / f"server{lines}.log"
        seen = 0
        args = ("-v", "--log-file", str(log_file))
        async with open_editor(
            "vscode", work, base / "home", env=env, init_options={"history": {"summarize": False}}, server_args=args
        ) as editor:
            for run in range(runs + 1):  # the first run warms caches (history index, imports)
                editor.open(target, old) if run == 0 else editor.change(target, old)
                # Each sample starts from an empty conversation, so every run measures the same work.
                await editor.command("nagent.conversation.clear", {"uri": editor.uri(target)})
                arrived: list[float] = []
                editor.before_apply = lambda params: arrived.append(time.perf_counter())
                start = time.perf_counter()
                result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "mark three lines"})
                assert result["applied"], result
                await asyncio.sleep(0.05)  # let the log line of the last model call land
                spent, seen = model_ms(log_file, seen)
                elapsed = arrived[0] - start - spent / 1000
                if run:
                    samples.append(elapsed)
    finally:
        fake.close()
    return statistics.median(samples), floor_seconds(old, new, runs), len(old.encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", default="1000,10000,50000", help="file sizes in lines, comma separated")
    args = parser.parse_args()
    sizes = [int(n) for n in args.lines.split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [(n, *asyncio.run(measure(n, args.runs, Path(tmp)))) for n in sizes]
    print(f"{'lines':>7} {'bytes':>9} {'ours (ms)':>10} {'diff floor (ms)':>16} {'ratio':>7}")
    for lines, ours, floor, size in rows:
        print(f"{lines:>7} {size:>9} {ours * 1000:>10.1f} {floor * 1000:>16.1f} {ours / floor:>7.1f}x")
    print("goal: ours <= 50 ms at 10k lines (model latency excluded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
