"""Token economy (DESIGN §11, issue "Token economy"): what a model pays and what the server spends, each figure beside
its floor measured in the same run.

1. A one-line change in files of 1k, 10k and 50k lines, answered with <nagent-replace> and with <nagent-write>:
   the output tokens the run reports (provider figures from the local OpenAI-compatible test server, ceil(chars/4)
   of each reply) and the server's time from `nagent.edit` to the client receiving applyEdit, model calls excluded.
   Floors: the tokens of the changed line alone (plus the closing answer both runs share), and diffing the two texts
   into minimal edits in-process. Goal: <nagent-replace> ≥ 20× fewer output tokens than <nagent-write> at 10k lines.
2. Prompt tokens per request over 50 consecutive requests in one conversation (each run reads a 2 KB file and
   answers), without a budget and with conversation.tokenBudget = 6000. Floor: the initial context alone (the system
   message). Goal: flat under the budget.
3. Append cost vs conversation size: appending one turn's blocks to a conversation of 100 to 50,000 lines
   (ConversationFile.append: append + fsync), beside the floor (os.write + fsync of the same bytes to a file of that
   size) and the old whole-file atomic rewrite. Goal: flat.

    .venv/bin/python -m benchmarks.token_economy [--runs 3] [--real FILE ...]   (e.g. git/git's diff.c and Makefile)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "server"))

from benchmarks.edit_overhead import floor_seconds, model_ms  # noqa: E402  (the same floor and model-time reading)
from tests.harness.fake_openai import FakeOpenAI  # noqa: E402
from tests.harness.gitrepo import Commit, build_repo  # noqa: E402
from tests.harness.lsp import open_editor  # noqa: E402

DONE = "<nagent-response>done</nagent-response>"


def ceil4(text: str) -> int:
    return (len(text) + 3) // 4 if text else 0


def make_text(lines: int) -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}  # line {i}\n" for i in range(lines // 2))


# -- 1. replace vs write ----------------------------------------------------------------------------------------------


def real_change(text: str) -> tuple[str, str, str]:
    """A one-line change in a real file: (the SEARCH lines, the REPLACE lines, the changed line), at the first line
    from a quarter of the way down whose two-line context is unique, so the block matches exactly once."""
    lines = text.splitlines(keepends=True)
    for i in range(max(1, len(lines) // 4), len(lines)):
        line = lines[i].rstrip("\n")
        search = lines[i - 1] + lines[i]
        if line.strip() and "<<<<<<<" not in search and text.count(search) == 1:
            changed = line + "  /* nagent */"
            return search, lines[i - 1] + changed + "\n", changed
    raise SystemExit("no uniquely placed line to change")


def _one_line_case(lines: int, source: Path | None) -> tuple[str, str, str, str]:
    """(old text, search, replace, the changed line): `source`'s text, or `lines` generated lines."""
    if source is not None:
        old = source.read_text(encoding="utf-8")
        return (old, *real_change(old))
    old = make_text(lines)
    at = lines // 4  # the "return" line of function_{at/2}
    old_line = f"    return x * {at // 2}  # line {at // 2}"
    new_line = f"    return x * {at // 2} + 1  # line {at // 2}"
    search = f"def function_{at // 2}(x):\n{old_line}\n"
    return old, search, f"def function_{at // 2}(x):\n{new_line}\n", new_line


async def one_line_change(lines: int, runs: int, base: Path, source: Path | None = None) -> dict:
    """`source`: a real file (its text, any size) instead of generated lines."""
    work = base / f"edit{lines}"
    name = source.name if source is not None else "big.py"
    old, search, replace, new_line = _one_line_case(lines, source)
    if source is not None:
        lines = old.count("\n")
    new = old.replace(search, replace, 1)
    assert new != old
    build_repo(work, [Commit("init", {name: old})])
    target = work / name
    replies = {
        "replace": (
            f'<nagent-replace path="{name}">\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n'
            "</nagent-replace>"
        ),
        "write": f'<nagent-write path="{name}">\n{new}</nagent-write>',
    }
    mode = {"now": "replace"}

    def responder(request):
        last = request.messages[-1]["content"]
        return DONE if "-result" in last else replies[mode["now"]]

    fake = FakeOpenAI(responder=responder)
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-bench", "NAGENT_MODEL": "bench"}
    out: dict = {"lines": lines, "bytes": len(old.encode()), "name": name if source is not None else ""}
    try:
        log_file = base / f"server{lines}.log"
        seen = 0
        args = ("-v", "--log-file", str(log_file))
        async with open_editor(
            "vscode", work, base / "home", env=env, init_options={"history": {"summarize": False}}, server_args=args
        ) as editor:
            editor.open(target, old)
            for name in ("replace", "write"):
                mode["now"] = name
                samples, tokens = [], 0
                for run in range(runs + 1):  # the first run warms caches
                    editor.change(target, old)
                    await editor.command("nagent.conversation.clear", {"uri": editor.uri(target)})
                    arrived: list[float] = []
                    editor.before_apply = lambda params, arrived=arrived: arrived.append(time.perf_counter())
                    start = time.perf_counter()
                    result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "add one"})
                    assert result["applied"] and result["edits"] == 1, result
                    await asyncio.sleep(0.05)  # the log line of the last model call lands
                    spent, seen = model_ms(log_file, seen)
                    if run:
                        samples.append(arrived[0] - start - spent / 1000)
                        tokens = result["tokens"]["output"]
                out[name] = (tokens, statistics.median(samples))
    finally:
        fake.close()
    out["token_floor"] = ceil4(new_line + "\n") + ceil4(DONE)
    out["time_floor"] = floor_seconds(old, new, max(runs, 3))
    return out


# -- 2. prompt tokens per request under a budget ----------------------------------------------------------------------


async def prompt_growth(budget: int | None, requests: int, base: Path) -> tuple[list[int], int, int]:
    """Prompt tokens of the first model call of each of `requests` runs; the system message's tokens; folds."""
    work = base / f"growth{budget or 'none'}"
    notes = "".join(f"note {i}: " + "x" * 60 + "\n" for i in range(30))  # ~2 KB
    build_repo(work, [Commit("init", {"app.py": "x = 1\n", "notes.md": notes})])
    target = work / "app.py"
    prompts: list[int] = []
    system: list[int] = []
    folds = [0]

    def responder(request):
        messages = request.messages
        if messages[0]["content"].startswith("You keep the working memory"):
            folds[0] += 1
            return {"text": "MEMORY: the user asked for notes.md many times; it holds 30 notes of x's."}
        last = messages[-1]["content"]
        if "<nagent-read-result" in last:
            return DONE
        prompts.append(sum(ceil4(str(m["content"])) for m in messages))
        system.append(ceil4(messages[0]["content"]))
        return '<nagent-read path="notes.md"/>'

    fake = FakeOpenAI(responder=responder)
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-bench", "NAGENT_MODEL": "bench"}
    options: dict = {"history": {"summarize": False}, "maxSteps": 5}
    options["conversation"] = {"tokenBudget": budget or 100_000_000}
    try:
        async with open_editor("vscode", work, base / "home", env=env, init_options=options) as editor:
            editor.open(target)
            for i in range(requests):
                await editor.command("nagent.edit", {"uri": editor.uri(target), "request": f"read the notes ({i})"})
    finally:
        fake.close()
    return prompts, min(system), folds[0]


# -- 3. append cost vs conversation size ------------------------------------------------------------------------------


def append_cost(lines: int, runs: int, base: Path) -> tuple[float, float, float]:
    from nagent_lsp.agent.conversation_file import ConversationFile
    from nagent_lsp.store.atomic import atomic_write_text
    from nagent_lsp.tags.transcript import agent_response_block, render_block

    body = "".join(f"line {i} of an earlier turn\n" for i in range(lines))
    block = [agent_response_block('<nagent-read path="a.py"/>'), render_block("nagent-read-result", "y = 2\n" * 20)]
    path = base / f"convo{lines}"
    floor_path = base / f"floor{lines}"
    atomic_write_text(path, body)
    floor_path.write_text(body)
    convo = ConversationFile.open(path)
    data = ("\n" + "\n".join(block)).encode()
    ours, floor, rewrite = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        convo.append(*block)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        fd = os.open(floor_path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        atomic_write_text(base / f"rewrite{lines}", convo.text)  # what every append cost before
        rewrite.append(time.perf_counter() - start)
    assert convo.rewrites == 0 and path.read_text() == convo.text
    return statistics.median(ours), statistics.median(floor), statistics.median(rewrite)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--real", nargs="*", type=Path, default=[], help="real files to change one line of as well")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        edits = [asyncio.run(one_line_change(n, args.runs, base)) for n in (1_000, 10_000, 50_000)]
        edits += [asyncio.run(one_line_change(i, args.runs, base, real)) for i, real in enumerate(args.real)]
        unbounded = asyncio.run(prompt_growth(None, args.requests, base))
        bounded = asyncio.run(prompt_growth(6000, args.requests, base))
        appends = [(n, *append_cost(n, max(args.runs, 5), base)) for n in (100, 1_000, 10_000, 50_000)]

    print("1. One-line change: output tokens and server time (model calls excluded)")
    print(
        f"{'lines':>7} {'bytes':>9} | {'replace tok':>11} {'write tok':>10} {'floor tok':>9} {'write/replace':>13} | "
        f"{'replace ms':>10} {'write ms':>9} {'diff floor ms':>13}"
    )
    for e in edits:
        (rt, rs), (wt, ws) = e["replace"], e["write"]
        print(
            f"{e['lines']:>7} {e['bytes']:>9} | {rt:>11} {wt:>10} {e['token_floor']:>9} {wt / rt:>12.1f}x | "
            f"{rs * 1000:>10.1f} {ws * 1000:>9.1f} {e['time_floor'] * 1000:>13.1f}  {e['name']}"
        )
    print("   goal: replace >= 20x fewer output tokens than write at 10k lines")
    print()
    print(f"2. Prompt tokens per request over {args.requests} requests in one conversation")
    marks = [1, 10, 25, 40, args.requests]
    print(f"{'':>22} " + " ".join(f"{'#' + str(m):>7}" for m in marks) + f" {'max':>7} {'folds':>6}")
    for label, (prompts, _floor, folds) in (("no budget", unbounded), ("tokenBudget 6000", bounded)):
        shown = " ".join(f"{prompts[m - 1]:>7}" for m in marks if m <= len(prompts))
        print(f"{label:>22} {shown} {max(prompts):>7} {folds:>6}")
    print(f"{'floor (system msg)':>22} " + " ".join(f"{unbounded[1]:>7}" for _ in marks))
    print("   goal: flat under the budget")
    print()
    print("3. Append cost vs conversation size (one turn: reply + result block)")
    print(f"{'lines':>7} {'append ms':>10} {'floor ms':>9} {'old rewrite ms':>15}")
    for lines, ours, floor, rewrite in appends:
        print(f"{lines:>7} {ours * 1000:>10.3f} {floor * 1000:>9.3f} {rewrite * 1000:>15.3f}")
    print("   goal: flat (append ~ floor at every size)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
