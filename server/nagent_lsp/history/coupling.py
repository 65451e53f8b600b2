"""Completeness hints: which files a change set probably should have touched too, from the history (issue 26).

A plain co-edit table (history.coedits) says "y changed in 40 % of x's commits". On git/git that buys little: at a
precision that keeps hints worth reading (≥ 0.6) it finds about 8 % of the further files a commit changed
(benchmarks/coupling.py prints it as the floor). The predictor here estimates, for each partner y of each changed
file x, the chance that y changes too, from the evidence ROSE (Zimmermann et al., ICSE 2004) and later work found
useful, each measured on git/git's history before the commits it was tested on:

- how often y changed with x, **recent commits weighing more** (x's commits decay by half every `HALF_LIFE` commits),
  and **in small commits** (a shared 3-file commit says more than a shared 40-file one);
- whether y changed **in the last few commits of the repository** (a patch series in progress);
- whether x and y are a **naming pair** (`x.c`↔`x.h`, `x.py`↔`test_x.py`, `builtin/x.c`↔`t/t1234-x.sh`);
- **every file already in the change set**: each changed file gives its own estimate (the highest counts), and
  ROSE's rule over the whole set (the share of the commits that changed all of them that also changed y) is one
  more estimate when enough commits changed them all.

The weights (`WEIGHTS`) are a logistic model fitted once on git/git commits older than every commit the benchmark
replays; `minRate` is the threshold on the estimated chance, `minCommits` the shared commits a partner needs. Pure:
no git, no I/O. `evidence_from_index` reads a history.index.RepoIndex (the caller holds its lock)."""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from nagent_lsp.history.index import RepoIndex, View

if TYPE_CHECKING:
    from nagent_lsp.history.service import HistoryService

P = TypeVar("P", bound=Hashable)  # how a path is given: git's bytes (the index) or text

HALF_LIFE = 4.0  # x's commits: the weight halves every 4 commits back
RECENT = 3  # "k of its last RECENT commits" in the message
# Logistic weights, fitted on git/git (3,000 commits of 2..50 files before the last 2,000, one target each).
WEIGHTS = {
    "bias": -3.21,
    "log_odds": -0.45,  # log((k + .5) / (n - k + .5)): the plain rate (mostly carried by the terms below)
    "decayed": 2.51,  # the recency-weighted share of x's commits that changed y
    "gap1": 2.31,  # y changed in HEAD's commit (the last one before the change)
    "gap5": 1.44,  # y changed in one of the 4 commits before that
    "named": 0.69,  # a naming pair
    "log_n": -1.01,  # x's commits counted
    "log_k": 1.38,  # shared commits
    "small": 2.09,  # mean of 1/(files the shared commit changed besides x)
}


@dataclass(frozen=True)
class FileEvidence(Generic[P]):
    """One changed file's history: the other files each of its commits changed (newest first; commits over the
    changeset cap and ignored ones already left out), and how many commits ago each partner last changed anywhere
    (1: in HEAD's commit; absent: long ago)."""

    path: P
    commits: Sequence[frozenset[P]]
    gaps: dict[P, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Hint(Generic[P]):
    path: P  # the changed file
    partner: P  # the file it usually changes with, untouched by the change set
    chance: float  # the estimated chance that the partner changes too (what minRate compares)
    commits: int  # shared commits
    total: int  # the changed file's commits counted
    recent: int  # shared commits among its last RECENT
    named: bool  # a naming pair
    rule: str = "file"  # "file": from `path`'s history; "changeset": ROSE's rule over every changed file

    @property
    def rate(self) -> float:
        return self.commits / self.total if self.total else 0.0


_STEM_PREFIX = re.compile(r"^(?:t\d{4}-|test_|test-|git-)")
_STEM_SUFFIX = re.compile(r"(?:_test|-test|_spec)$")


def stem(path: str) -> str:
    """The name a file shares with its naming partners: the base name up to its first dot, without test prefixes or
    suffixes (`test_`, `_test`, `_spec`, `t1234-`) or `git-` (`builtin/x.c`↔`Documentation/git-x.adoc`)."""
    base = path.rsplit("/", 1)[-1]
    if not base.startswith("."):
        base = base.split(".", 1)[0]
    return _STEM_SUFFIX.sub("", _STEM_PREFIX.sub("", base)).lower()


def naming_pair(a: str, b: str) -> bool:
    """x.c↔x.h, x.py↔test_x.py, x.ts↔x.test.ts, builtin/x.c↔t/t1234-x.sh: the same stem, a different file."""
    if a == b:
        return False
    sa = stem(a)
    return len(sa) >= 2 and sa == stem(b)


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@dataclass
class _Tally:
    count: int = 0
    decayed: float = 0.0
    small: float = 0.0
    recent: int = 0


def file_chances(
    evidence: FileEvidence[P], name: Callable[[P], str] = str, min_commits: int = 1
) -> dict[P, tuple[float, _Tally]]:
    """partner -> (estimated chance it changes with `evidence.path`, the counts behind it)."""
    n = len(evidence.commits)
    if n == 0:
        return {}
    tallies: dict[P, _Tally] = {}
    total_weight = 0.0
    for i, others in enumerate(evidence.commits):
        weight = 0.5 ** (i / HALF_LIFE)
        total_weight += weight
        size = max(1, len(others))
        for p in others:
            t = tallies.get(p)
            if t is None:
                t = tallies[p] = _Tally()
            t.count += 1
            t.decayed += weight
            t.small += 1.0 / size
            t.recent += i < RECENT
    own = name(evidence.path)
    w = WEIGHTS
    out: dict[P, tuple[float, _Tally]] = {}
    for p, t in tallies.items():
        if t.count < min_commits:
            continue
        gap = evidence.gaps.get(p, 1 << 30)
        z = (
            w["bias"]
            + w["log_odds"] * math.log((t.count + 0.5) / (n - t.count + 0.5))
            + w["decayed"] * t.decayed / total_weight
            + w["gap1"] * (gap <= 1)
            + w["gap5"] * (1 < gap <= 5)
            + w["named"] * naming_pair(own, name(p))
            + w["log_n"] * math.log(n)
            + w["log_k"] * math.log(t.count)
            + w["small"] * t.small / t.count
        )
        out[p] = (_logistic(z), t)
    return out


def changeset_rule(evidence: Sequence[FileEvidence[P]], change_set: Collection[P]) -> tuple[dict[P, int], int]:
    """ROSE's rule with the whole change set as antecedent: among the first file's commits that also changed every
    other file of the set, how many changed each partner (and how many such commits there are)."""
    if len(evidence) < 2:
        return {}, 0
    first = evidence[0]
    rest = frozenset(e.path for e in evidence[1:])
    counts: dict[P, int] = {}
    together = 0
    for others in first.commits:
        if rest <= others:
            together += 1
            for p in others:
                if p not in change_set:
                    counts[p] = counts.get(p, 0) + 1
    return counts, together


def predict(
    change_set: Collection[P],
    evidence: Sequence[FileEvidence[P]],
    *,
    min_rate: float,
    min_commits: int,
    limit: int = 3,
    name: Callable[[P], str] = str,
    exists: Callable[[P], bool] = lambda _p: True,
) -> list[Hint[P]]:
    """The hints for a change set: untouched partners whose estimated chance is at least `min_rate`, with at least
    `min_commits` shared commits, best first, at most `limit` (false hints are what makes people ignore them).
    `evidence`: one per changed file that has history; `exists(partner)` drops files gone from the work tree."""
    touched = set(change_set)
    best: dict[P, Hint[P]] = {}
    for ev in evidence:
        for partner, (chance, t) in file_chances(ev, name, min_commits).items():
            if partner in touched or chance < min_rate:
                continue
            hint = Hint(
                ev.path, partner, chance, t.count, len(ev.commits), t.recent, naming_pair(name(ev.path), name(partner))
            )
            if partner not in best or chance > best[partner].chance:
                best[partner] = hint
    counts, together = changeset_rule(evidence, touched)
    if together >= max(2, min_commits):
        for partner, count in counts.items():
            rate = count / together
            if count >= min_commits and rate >= min_rate and (partner not in best or rate > best[partner].chance):
                path = evidence[0].path
                best[partner] = Hint(
                    path, partner, rate, count, together, 0, naming_pair(name(path), name(partner)), "changeset"
                )
    ranked = sorted(best.values(), key=lambda h: (-h.chance, name(h.partner)))
    return [h for h in ranked if exists(h.partner)][:limit]


def floor_hints(
    change_set: Collection[P], evidence: Sequence[FileEvidence[P]], *, min_rate: float, min_commits: int
) -> list[Hint[P]]:
    """Today's table as a predictor (the benchmark's floor): every untouched partner of a changed file whose plain
    rate is at least `min_rate` over at least `min_commits` shared commits, no limit."""
    touched = set(change_set)
    best: dict[P, Hint[P]] = {}
    for ev in evidence:
        n = len(ev.commits)
        counts: dict[P, int] = {}
        for others in ev.commits:
            for p in others:
                counts[p] = counts.get(p, 0) + 1
        for p, k in counts.items():
            if p not in touched and k >= min_commits and k / n >= min_rate:
                if p not in best or k / n > best[p].chance:
                    best[p] = Hint(ev.path, p, k / n, k, n, 0, False, "pairwise")
    return sorted(best.values(), key=lambda h: -h.chance)


def evidence_from_index(
    index: RepoIndex,
    path: bytes,
    view: View,
    now: int,
    *,
    max_commits: int,
    max_changeset_files: int,
    ignored: Callable[[str], bool] = lambda _h: False,
) -> FileEvidence[bytes] | None:
    """A file's evidence from the repository index, as seen by `view` (the caller holds the index's lock): its
    newest `max_commits` commits (following renames) of at most `max_changeset_files` files, the partners under
    the names they have in the view, and each partner's gap (`now` minus the id of its last commit in the view;
    `now`: the id the next commit would get, i.e. HEAD's id + 1). None: the file has no history."""
    lineage = index.lineage(path, view=view, window=0)
    if not lineage.ids:
        return None
    own = {index.path_ids[n] for n in lineage.names if n in index.path_ids}
    commits: list[frozenset[bytes]] = []
    partners: set[int] = set()
    for cid in lineage.ids:
        if len(commits) >= max_commits:
            break
        pids = index.touched(cid)
        if len(pids) > max_changeset_files or ignored(index.hash_of(cid)):
            continue
        names = {index.canonical(p, cid, view) for p in pids} - own
        partners |= names
        commits.append(frozenset(index.paths[p] for p in names))
    gaps: dict[bytes, int] = {}
    for pid in partners:
        last = _last_in_view(index.by_path.get(pid), view, now)
        if last is not None and now - last <= 5:
            gaps[index.paths[pid]] = now - last
    return FileEvidence(path, commits, gaps)


def _last_in_view(ids: Sequence[int] | None, view: View, now: int) -> int | None:
    """The newest commit id below `now` in `ids` (ascending) that the view has, looking back at most 5 ids."""
    if not ids:
        return None
    i = bisect_left(ids, now) - 1
    while i >= 0 and ids[i] >= now - 5:
        if view.has(ids[i]):
            return ids[i]
        i -= 1
    return None


def dead(index: RepoIndex, path: bytes, view: View) -> bool:
    pid = index.path_ids.get(path)
    return pid is None or index.is_dead(pid, view)


__all__ = [
    "FileEvidence",
    "Hint",
    "changeset_rule",
    "evidence_from_index",
    "file_chances",
    "floor_hints",
    "naming_pair",
    "predict",
    "service_evidence",
    "stem",
]


def service_evidence(
    service: HistoryService, rels: Sequence[str], max_commits: int, max_changeset_files: int
) -> tuple[list[FileEvidence[bytes]], frozenset[bytes]] | None:
    """Evidence for each changed file (repository-relative) from the service's index at HEAD, and the partners
    that still exist in HEAD's view. None when the index is not ready for the current HEAD (no hints then: a hint
    from an old or partial history would be the kind of false hint people learn to ignore)."""
    from nagent_lsp.history.encoding import to_bytes
    from nagent_lsp.history.ignore_revs import is_ignored
    from nagent_lsp.history.refs import read_head

    head = read_head(service.root)
    revs = service.ctx.ignored()
    with service.ctx.lock:
        index = service.keeper.index
        if index is None or head is None or index.head != head:
            return None
        view = index.view
        cid = index.lookup(head)
        now = (cid if cid is not None else len(index) - 1) + 1
        found: list[FileEvidence[bytes]] = []
        for rel in rels:
            ev = evidence_from_index(
                index,
                to_bytes(rel),
                view,
                now,
                max_commits=max_commits,
                max_changeset_files=max_changeset_files,
                ignored=lambda h: is_ignored(h, revs),
            )
            if ev is not None:
                found.append(ev)
        partners = {p for ev in found for others in ev.commits for p in others}
        alive = frozenset(p for p in partners if not dead(index, p, view))
    return found, alive


def changed_since_head(
    service: HistoryService,
    paths: Sequence[bytes],
    max_bytes: int,
    buffer: Callable[[bytes], bytes | None] = lambda _p: None,
) -> set[bytes]:
    """Which of `paths` (repository-relative) differ in the work tree from HEAD: a partner the user or an earlier
    run already changed is part of the change being made, so it gets no hint. One `git ls-tree` for all of them;
    the work tree's side (the editor's buffer when `buffer(path)` gives one, else the disk) is hashed here (git's
    blob id), no other process. A file too big to read counts as unchanged; a file HEAD lacks, as changed."""
    import hashlib
    import os

    from nagent_lsp.history.encoding import git_arg
    from nagent_lsp.history.git import GitError

    if not paths:
        return set()
    try:
        out = service.git.run(["ls-tree", "-z", "HEAD", "--", *(git_arg(p) for p in paths)])
    except GitError:
        return set()
    blobs: dict[bytes, str] = {}
    for entry in out.split(b"\0"):
        meta, tab, name = entry.partition(b"\t")
        fields = meta.split()
        if tab and len(fields) == 3 and fields[1] == b"blob":
            blobs[name] = fields[2].decode("ascii", "replace")
    changed: set[bytes] = set()
    root = os.fsencode(service.root)
    for p in paths:
        full = os.path.join(root, p)
        data = buffer(p)
        try:
            if data is None and os.path.getsize(full) <= max_bytes:
                with open(full, "rb") as f:
                    data = f.read(max_bytes + 1)
        except OSError:
            continue
        if data is None:
            continue
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
        if blobs.get(p) != sha:
            changed.add(p)
    return changed
