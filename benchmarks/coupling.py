"""Completeness-hint replay (issue 26): how well history predicts the further files a commit changed.

    python benchmarks/coupling.py [--repo /work/.mirror/git+git/repo] [-k 2000] [--max-changeset-files 50]
                                  [--max-commits 200] [--index FILE]

Walks the repository's history with the server's own index (history.index, one `git log --name-status -M` pass).
For each of the last K commits that change 2..maxChangesetFiles files (ids are topological, so "strictly earlier"
is "a smaller id"; a View at the commit is exactly the index as it stood before it — incremental for free), it takes
one of the commit's files as the target (a random choice seeded by the commit's hash), collects the hints the server
would show for a change set of that one file (history.coupling.predict, at most 3), and scores them against the
commit's other files:

  precision  hinted files the commit did change / hints shown
  recall     changed files hinted / other files changed (added files included: no history predicts those)
  top-3      queries with a correct file among the first 3 hints / queries with a hint (ROSE's figure)
  hints/ch   hints shown per change

for several thresholds (minRate, minCommits), with the plain pairwise table (today's co-edit table: rate and shared
commits, no limit) as the floor in the same run. A second scenario, "all but one", gives the predictor every file of
the commit but one (ROSE's "incomplete change" check: every file in the change set is evidence) and asks for the
missing one. The summary line: the best recall at precision >= 0.6 of each, and the ratio (goal: >= 2x the floor).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from nagent_lsp.history.coupling import FileEvidence, Hint, dead, evidence_from_index, floor_hints, predict  # noqa: E402
from nagent_lsp.history.git import GitRepository  # noqa: E402
from nagent_lsp.history.index import RepoIndex, View, build_from_log  # noqa: E402

RATES = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
OURS = [(r, c) for r in RATES for c in (1, 2, 3)]
FLOOR = [(r, c) for r in RATES for c in (2, 3, 5)]
PRECISION_GOAL = 0.6


@dataclass
class Query:
    expected: frozenset[bytes]
    ours: list[Hint[bytes]]  # every hint at the lowest threshold, best first
    floor: list[Hint[bytes]]


@dataclass
class Score:
    label: str
    min_rate: float
    min_commits: int
    precision: float
    recall: float
    top3: float
    per_change: float


def score(label: str, queries: Sequence[Query], pick: Callable[[Query], list[Hint[bytes]]], r: float, c: int) -> Score:
    shown = correct = expected = with_hint = top3 = 0
    for q in queries:
        hints = [h.partner for h in pick(q) if h.chance >= r and h.commits >= c]
        if label == "ours":
            hints = hints[:3]
        hits = [p in q.expected for p in hints]
        shown += len(hints)
        correct += sum(hits)
        expected += len(q.expected)
        if hints:
            with_hint += 1
            top3 += any(hits[:3])
    return Score(
        label,
        r,
        c,
        correct / shown if shown else 0.0,
        correct / expected if expected else 0.0,
        top3 / with_hint if with_hint else 0.0,
        shown / len(queries) if queries else 0.0,
    )


def best_recall(rows: Sequence[Score]) -> Score | None:
    good = [s for s in rows if s.precision >= PRECISION_GOAL]
    return max(good, key=lambda s: s.recall) if good else None


def load_index(repo: Path, cache: Path | None) -> tuple[RepoIndex, float]:
    started = time.monotonic()
    if cache is not None and cache.exists():
        index = RepoIndex.decode([RepoIndex.header(), cache.read_bytes()])
    else:
        index = build_from_log(GitRepository(repo).log_all())
        if cache is not None:
            cache.write_bytes(index.encode_segment())
    return index, time.monotonic() - started


def replay(index: RepoIndex, k: int, max_files: int, max_commits: int, scenario: str) -> list[Query]:
    chosen: list[int] = []
    for cid in range(len(index) - 1, -1, -1):
        if 2 <= len(set(index.touched(cid))) <= max_files:
            chosen.append(cid)
            if len(chosen) >= k:
                break
    queries: list[Query] = []
    for cid in reversed(chosen):
        view = View(None, None, cid)  # every commit before this one: the index as it stood
        files = sorted({index.paths[p] for p in index.touched(cid)})
        target = random.Random(index.hash_of(cid)).choice(files)
        if scenario == "target":
            change_set, expected = [target], frozenset(f for f in files if f != target)
        else:  # all but one: the target is the file left out
            change_set, expected = [f for f in files if f != target], frozenset([target])
        evidence: list[FileEvidence[bytes]] = []
        for path in change_set:
            ev = evidence_from_index(index, path, view, cid, max_commits=max_commits, max_changeset_files=max_files)
            if ev is not None:
                evidence.append(ev)
        ours = predict(
            change_set,
            evidence,
            min_rate=min(r for r, _ in OURS),
            min_commits=1,
            limit=1_000,
            name=lambda p: p.decode("utf-8", "replace"),
            exists=lambda p, view=view: not dead(index, p, view),
        )
        floor = [
            h
            for h in floor_hints(change_set, evidence, min_rate=0.3, min_commits=2)
            if not dead(index, h.partner, view)
        ]
        queries.append(Query(expected, ours, floor))
    return queries


def table(rows: Sequence[Score]) -> str:
    lines = [
        "| predictor | minRate | minCommits | precision | recall | top-3 | hints/change |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.label} | {s.min_rate:.2f} | {s.min_commits} | {s.precision:.2f} | {s.recall:.3f} | {s.top3:.2f}"
            f" | {s.per_change:.2f} |"
        )
    return "\n".join(lines)


def report(scenario: str, queries: Sequence[Query]) -> None:
    floor = [score("floor (pairwise)", queries, lambda q: q.floor, r, c) for r, c in FLOOR]
    ours = [score("ours", queries, lambda q: q.ours, r, c) for r, c in OURS]
    print(f"\n### scenario: {scenario} ({len(queries)} commits)\n")
    print(table(floor + ours))
    bf, bo = best_recall(floor), best_recall(ours)

    def show(s: Score | None) -> str:
        return (
            "none"
            if s is None
            else f"recall {s.recall:.3f} (precision {s.precision:.2f}, minRate {s.min_rate}, minCommits "
            f"{s.min_commits})"
        )

    print(f"\nbest at precision >= {PRECISION_GOAL}: floor {show(bf)}; ours {show(bo)}")
    if bf and bo and bf.recall:
        print(f"ratio ours/floor: {bo.recall / bf.recall:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path("/work/.mirror/git+git/repo"))
    ap.add_argument("-k", type=int, default=2000, help="commits replayed (the last K of 2..max files)")
    ap.add_argument("--max-changeset-files", type=int, default=50)
    ap.add_argument("--max-commits", type=int, default=200)
    ap.add_argument("--index", type=Path, help="keep the built index in this file (reused when it exists)")
    ap.add_argument("--scenario", choices=("target", "all-but-one", "both"), default="both")
    args = ap.parse_args()
    started = time.monotonic()
    index, built = load_index(args.repo, args.index)
    print(f"repository {args.repo}: {len(index)} commits, index in {built:.1f} s")
    for scenario in ("target", "all-but-one") if args.scenario == "both" else (args.scenario,):
        t = time.monotonic()
        queries = replay(index, args.k, args.max_changeset_files, args.max_commits, scenario)
        report(scenario, queries)
        print(f"replay: {time.monotonic() - t:.1f} s")
    print(f"\ntotal run time: {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
