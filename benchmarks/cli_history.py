"""Cold CLI history: `nagent-lsp history FILE` as a user types it, beside its floor measured in the same run.

    python benchmarks/cli_history.py [--runs 7] [--git-mirror /work/.mirror/git+git/repo] [--git-file FILE]
                                     [--nagent PATH] [--skip-git] [--keep]

Floor (issue 29): the CLI's own minimal start (`nagent-lsp --version`) plus the one `git log -n 50 -- FILE` the
answer needs, timed back to back in the same round. Goal: the cold answer ≤ 1.5× that floor.

Repositories: a small generated one (120 commits, 24 files, the measured file renamed half-way, so the answer
follows a rename) and, unless --skip-git, a scratch `git clone --shared` of git/git (objects shared, nothing copied).
Cases, interleaved round by round (floor, then each of ours) so a busy machine slows them alike:

  cold         no persisted index in the state root (the first `history` a user runs in a repository)
  cold --json  the same, printing the `nagent.history` result as JSON (what editors' scripts read)
  index        a persisted index exists (a server ran in this repository before): the CLI loads it

Each row prints min/median/max of --runs runs and the ratio of medians to the floor, with the load average, and the
median CPU time (user + system of the process and its git children: what a busy machine does not stretch). HOME is
a temporary folder (no user config, no key variable): the start every user gets first. `--nagent` is the launcher
measured (default: the `nagent-lsp` console script beside this Python, else `python -m nagent_lsp`).
"""

from __future__ import annotations

import argparse
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
GIT_MIRROR = Path("/work/.mirror/git+git/repo")
GIT_FILE = "builtin/blame.c"
SMALL_COMMITS = 120
SMALL_FILES = 24
GOAL = 1.5


def launcher(given: str | None) -> list[str]:
    if given:
        return [given]
    script = Path(PYTHON).parent / "nagent-lsp"
    return [str(script)] if script.exists() else [PYTHON, "-m", "nagent_lsp"]


CPU: list[float] = []  # CPU seconds of the last run (user + system, its git children included)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    cpu = _children_cpu()
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - started
    CPU[:] = [_children_cpu() - cpu]
    return elapsed


def run_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    return run(argv, env, cwd), CPU[0]


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=env)


def make_small_repo(where: Path) -> tuple[Path, str]:
    """A repository of SMALL_COMMITS commits over SMALL_FILES files; `src/core.py` is born `src/old_core.py` and
    renamed half-way (a rename the card must follow). Returns (repository, the measured file)."""
    repo = where / "small"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com"}
    env |= {"GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.com"}
    (repo / "src").mkdir()
    target = "src/old_core.py"
    for i in range(SMALL_COMMITS):
        if i == SMALL_COMMITS // 2:
            git(repo, "mv", target, "src/core.py")
            target = "src/core.py"
        changed = [target, f"src/mod{i % SMALL_FILES}.py"] if i % 3 else [f"src/mod{i % SMALL_FILES}.py"]
        for rel in changed:
            with open(repo / rel, "a", encoding="utf-8") as f:
                f.write(f"value_{i} = {i}\n")
        git(repo, "add", "-A")
        author = ["Ann <ann@example.com>", "Bob <bob@example.com>", "Cy <cy@example.com>"][i % 3]
        stamp = f"{1_700_000_000 + i * 3600} +0000"
        git(
            repo,
            "commit",
            "-q",
            "-m",
            f"change {i}",
            f"--author={author}",
            env={**env, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
        )
    return repo, target


def clone_git(where: Path, mirror: Path) -> Path:
    repo = where / "git"
    git(where, "clone", "-q", "--shared", str(mirror), str(repo))
    return repo


def build_index(repo: Path, rel: str, env: dict[str, str]) -> Path:
    """Build and persist the repository index the way a server does; returns the index file."""
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from nagent_lsp.headless.common import session_for\n"
        "from nagent_lsp.operations.history import service_for\n"
        "path = Path(sys.argv[1])\nservice, _ = service_for(session_for(path), path)\n"
        "service.start(build=True).result()\nservice.close()\nprint(service.index_path)\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", code, str(repo / rel)], env=env, cwd=repo, check=True, capture_output=True, text=True
    )
    return Path(done.stdout.strip().splitlines()[-1])


Samples = dict[str, list[tuple[float, float]]]  # name -> [(wall, cpu)]


def measure(repo: Path, rel: str, nagent: list[str], env: dict[str, str], runs: int) -> Samples:
    index = build_index(repo, rel, env)
    aside = index.with_name(index.name + ".aside")
    index.rename(aside)
    history = [*nagent, "history", rel]
    samples: Samples = {k: [] for k in ("floor", "cold", "cold --json", "index")}
    for attempt in range(runs + 1):  # the first round warms the page cache and .pyc files, and is dropped
        version = run_cpu([*nagent, "--version"], env, repo)
        log = run_cpu(["git", "log", "-n", "50", "--", rel], env, repo)
        got = {
            "floor": (version[0] + log[0], version[1] + log[1]),
            "cold": run_cpu(history, env, repo),
            "cold --json": run_cpu([*history, "--json"], env, repo),
        }
        shutil.copyfile(aside, index)
        got["index"] = run_cpu(history, env, repo)
        index.unlink()
        if attempt:
            for name, value in got.items():
                samples[name].append(value)
    return samples


def report(title: str, samples: Samples) -> None:
    floor = statistics.median(w for w, _ in samples["floor"])
    floor_cpu = statistics.median(c for _, c in samples["floor"])
    print(f"{title}  (load {os.getloadavg()[0]:.2f})")
    print(f"  {'':<12} {'wall min / median / max':>29}   ratio   {'cpu median':>10}  ratio")
    for name, pairs in samples.items():
        values = [w for w, _ in pairs]
        low, mid, high = min(values), statistics.median(values), max(values)
        cpu = statistics.median(c for _, c in pairs)
        ratio = "" if name == "floor" else f"{mid / floor:5.2f}×"
        cpu_ratio = "" if name == "floor" else f"{cpu / floor_cpu:5.2f}×"
        goal = "" if name != "cold" else f"  (goal ≤ {GOAL}×: {'met' if mid / floor <= GOAL else 'NOT met'})"
        print(
            f"  {name:<12} {low * 1000:7.1f} / {mid * 1000:7.1f} / {high * 1000:7.1f} ms {ratio:>7}"
            f"   {cpu * 1000:7.1f} ms {cpu_ratio:>6}{goal}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--git-mirror", type=Path, default=GIT_MIRROR)
    parser.add_argument("--git-file", default=GIT_FILE)
    parser.add_argument("--nagent", default=None, help="the launcher to measure (default: the console script)")
    parser.add_argument("--skip-git", action="store_true", help="the small repository only")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="nagent-cli-history-"))
    home = scratch / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_", "PYTHONDONTWRITEBYTECODE"))}
    env["HOME"] = str(home)
    nagent = launcher(args.nagent)
    try:
        print(
            f"cold CLI history: min / median / max of {args.runs} interleaved runs; floor = `{' '.join(nagent[-1:])}"
            " --version` + `git log -n 50 -- FILE`"
        )
        repo, rel = make_small_repo(scratch)
        report(f"small repository ({SMALL_COMMITS} commits, {rel} renamed)", measure(repo, rel, nagent, env, args.runs))
        if not args.skip_git and args.git_mirror.exists():
            repo = clone_git(scratch, args.git_mirror)
            report(f"git/git scratch clone ({args.git_file})", measure(repo, args.git_file, nagent, env, args.runs))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
