"""Make a large, realistic synthetic git repository with one streamed `git fast-import`, for benchmarks/history.py.

    python benchmarks/make_large_repo.py OUT_DIR [--commits 100000] [--files N] [--seed 7] [--end EPOCH]
                                                 [--years Y] [--repack]

Deterministic: the same arguments (seed and --end included) give the same commit hashes. --end defaults to the
start of today (UTC), so a commit made afterwards is newer than every generated one; it is printed.

What makes it realistic (what git.git has and the history index must survive):
- committer dates strictly increasing in the order commits are made, spread over --years and ending at --end;
  author dates sometimes days older (patches applied later), committers often a maintainer, time zones vary;
- many authors (about one per 150 commits, Zipf-distributed), ASCII, UTF-8 (accents, CJK) and Latin-1 names (bytes
  that are NOT valid UTF-8, with no `encoding` header, as in git.git's 7eb93c8965); some messages in Latin-1 with an
  `encoding ISO-8859-1` header, some in Latin-1 without one;
- paths that are not valid UTF-8 (Latin-1 bytes), paths with spaces and UTF-8 accents;
- files added and deleted as history goes on (the tree grows to --files), single-file renames (some with edits),
  a folder rename, a few mass reformats (hundreds of files), a hot file renamed half way;
- topic branches forked from the mainline, worked on while the mainline moves on, merged with merge commits;
  a `maint` branch forked at 90 % that gets fixes of its own; lightweight release tags.

Prints what it made and files to measure (benchmarks/history.py --files ...).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HOT_OLD = b"src/engine.c"
HOT = b"src/core/engine.c"
HOT_PAIR = b"src/core/engine.h"
LATIN1_FILE = b"docs/caf\xe9-notes.txt"  # not valid UTF-8
SPACED_FILE = "docs/guide/naïve résumé.md".encode()
SPECIAL = {HOT_OLD, HOT, HOT_PAIR, LATIN1_FILE, SPACED_FILE}
MAX_LINES = 400  # files stop growing here (edits then delete as often as they add)

FIRST = ["Alice", "Bob", "Carol", "Dmitri", "Erin", "Femi", "Gita", "Hiro", "Ines", "Jun", "Kofi", "Lena", "Mateo"]
FIRST += ["Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe"]
ACCENTED_FIRST = ["José", "Zoë", "Björn", "François", "Günther", "Åsa", "Renée", "Raphaël", "Jürgen", "Inês", "Çelik"]
LAST = ["Smith", "Ng", "Okafor", "Ivanova", "Garcia", "Tanaka", "Kowalski", "Haddad", "Lindqvist", "Moreau", "Rossi"]
LAST += ["Schmidt", "Kim", "Patel", "Novak", "Silva", "Brown", "Dubois", "Yilmaz", "Cohen", "Nakamura", "Larsen"]
ACCENTED_LAST = ["Müller", "Núñez", "Sørensen", "Wiśniewska", "Gonçalves", "Ødegård", "Brontë", "Dvořák", "Ärlig"]
LATIN1_NAMES = ["René Müller", "Jörg Schäfer", "Hélène Dupré", "Ana Núñez", "Søren Kjær", "François Noël", "Åke Ström"]
CJK_NAMES = ["山田 太郎", "김 민준", "王 芳", "Đặng Thị Hà"]
TIMEZONES = ["+0000", "+0100", "+0200", "-0700", "-0500", "+0530", "+0900", "-0300", "+1000", "-0800"]
AREAS = ["core", "net", "io", "ui", "db", "util", "auth", "api", "cli", "cache", "docs", "build", "tests", "refs"]
VERBS = ["fix", "add", "rework", "simplify", "document", "speed up", "handle", "clean up", "refactor", "drop"]
THINGS = ["error path", "off-by-one", "locking", "config parsing", "buffer reuse", "the cache", "timeouts"]
THINGS += ["unicode names", "empty input", "the retry loop", "memory leak", "option handling", "tests"]


def quote(path: bytes) -> bytes:
    """A C-style quoted path, as fast-import reads it (needed for `R` sources with spaces and for odd bytes)."""
    out = bytearray(b'"')
    for b in path:
        if b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        elif b < 0x20 or b >= 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out) + b'"'


def data(raw: bytes) -> bytes:
    return b"data %d\n" % len(raw) + raw + b"\n"


class Tree:
    """The mainline's files and their lines (bytes). Topic branches edit the same dict: a file a topic holds is
    locked against mainline changes until the topic is merged, so the merge result is simply the topic's text."""

    def __init__(self, rng: random.Random, target_files: int):
        self.rng = rng
        top = ["src", "lib", "docs", "tests", "scripts", "config", "tools"]
        folders = [f"{t}/{a}" for t in top[:2] for a in AREAS] + ["docs", "docs/guide", "tests", "scripts", "config"]
        while len(folders) < max(40, target_files // 40):
            base = rng.choice(folders)
            if base.count("/") < 4:
                folders.append(f"{base}/{rng.choice(AREAS)}{len(folders)}")
        self.folders = sorted(set(folders))
        self.content: dict[bytes, list[bytes]] = {}
        self.paths: list[bytes] = []  # for random choice; kept in step with content (swap-remove)
        self.where: dict[bytes, int] = {}
        self.serial = itertools.count()

    def new_name(self) -> bytes:
        folder = self.rng.choice(self.folders)
        n = next(self.serial)
        ext = self.rng.choice([".c", ".c", ".h", ".py", ".md", ".txt", ".json", ".sh"])
        r = self.rng.random()
        if r < 0.01:
            return f"{folder}/r\xe9sum\xe9_{n:05d}{ext}".encode("latin-1")  # invalid UTF-8
        if r < 0.02:
            return f"{folder}/naïve {n:05d}{ext}".encode()  # a space and UTF-8
        return f"{folder}/mod{n:05d}{ext}".encode()

    def add(self, path: bytes, lines: list[bytes] | None = None) -> bytes:
        if lines is None:
            lines = [b"// %s line %d" % (path, k) for k in range(self.rng.randint(5, 60))]
        self.content[path] = lines
        self.where[path] = len(self.paths)
        self.paths.append(path)
        return self.text(path)

    def remove(self, path: bytes) -> list[bytes]:
        i = self.where.pop(path)
        last = self.paths.pop()
        if last != path:
            self.paths[i] = last
            self.where[last] = i
        return self.content.pop(path)

    def text(self, path: bytes) -> bytes:
        return b"\n".join(self.content[path]) + b"\n"

    def edit(self, path: bytes, tag: bytes, store: bool = True) -> bytes:
        lines = self.content[path] if store else list(self.content[path])
        rng = self.rng
        r = rng.random()
        grow = len(lines) < MAX_LINES
        if r < 0.55 and lines:
            i = rng.randrange(len(lines))
            lines[i] = lines[i].split(b" /*")[0] + b" /* " + tag + b" */"
        elif (r < 0.85 and grow) or len(lines) < 5:
            i = rng.randrange(len(lines) + 1)
            lines[i:i] = [b"// added in %s (%d)" % (tag, k) for k in range(rng.randint(1, 4))]
        else:
            del lines[rng.randrange(len(lines))]
        return b"\n".join(lines) + b"\n"


class Authors:
    def __init__(self, rng: random.Random, count: int):
        self.people: list[tuple[bytes, bytes, bytes]] = []  # (name, email, tz)
        for i in range(count):
            r = rng.random()
            if r < 0.06:
                name = rng.choice(LATIN1_NAMES).encode("latin-1")  # not valid UTF-8
            elif r < 0.16:
                name = f"{rng.choice(ACCENTED_FIRST + FIRST)} {rng.choice(ACCENTED_LAST)}".encode()
            elif r < 0.18:
                name = rng.choice(CJK_NAMES).encode()
            else:
                name = f"{rng.choice(FIRST)} {rng.choice(LAST)}".encode()
            email = b"dev%05d@example.org" % i if rng.random() < 0.7 else b"user%d@mail%d.example.com" % (i, i % 7)
            self.people.append((name, email, rng.choice(TIMEZONES).encode()))
        weights = [1.0 / (i + 1) ** 1.07 for i in range(count)]
        self.cum = list(itertools.accumulate(weights))
        self.rng = rng

    def pick(self) -> tuple[bytes, bytes, bytes]:
        return self.people[bisect.bisect(self.cum, self.rng.random() * self.cum[-1])]


class Topic:
    def __init__(self, name: str, tip: int, length: int, files: list[bytes]):
        self.name = name
        self.tip = tip
        self.left = length
        self.files = files
        self.touched: set[bytes] = set()


def commit_times(rng: random.Random, n: int, end: int, years: float) -> list[int]:
    """n strictly increasing epochs ending at `end`: exponential gaps (bursty), scaled to the span."""
    gaps = [rng.expovariate(1.0) for _ in range(n)]
    span = years * 365.25 * 86400
    scale = span / sum(gaps)
    out, t = [], end - span
    for g in gaps:
        t += g * scale
        out.append(int(t))
    for i in range(1, n):  # strictly increasing, whatever the rounding
        if out[i] <= out[i - 1]:
            out[i] = out[i - 1] + 1
    shift = out[-1] - end
    return [x - shift for x in out] if shift > 0 else out


def main() -> int:  # noqa: C901, PLR0912, PLR0915  2026-11-27: a one-off generator script read top to bottom
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--commits", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=None, help="files at the end (default: commits/25, 2,000-40,000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--end", type=int, default=None, help="epoch of the last commit (default: today 00:00 UTC)")
    ap.add_argument("--years", type=float, default=None, help="history span (default: commits/20,000, 2-20)")
    ap.add_argument("--repack", action="store_true", help="git repack -adf afterwards (slow on big histories)")
    args = ap.parse_args()
    n_commits = max(100, args.commits)
    target_files = args.files or min(40_000, max(2_000, n_commits // 25))
    years = args.years or min(20.0, max(2.0, n_commits / 20_000))
    end = args.end if args.end is not None else int(time.time()) // 86400 * 86400
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        print(f"{out} exists and is not empty", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=str(out))  # no user config can change what is written
    subprocess.run(["git", "init", "-q", "-b", "main", str(out)], check=True, env=env)
    rng = random.Random(args.seed)
    tree = Tree(rng, target_files)
    authors = Authors(rng, min(6_000, max(60, n_commits // 150)))
    maintainers = authors.people[:3]
    times = commit_times(rng, n_commits, end, years)
    proc = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done", "--depth=20"], cwd=out, stdin=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None
    w = proc.stdin
    stats = {"merges": 0, "renames": 0, "adds": 0, "deletes": 0, "mass": 0, "latin1 msgs": 0, "tags": 0}
    made = 0
    mark = 0
    t0 = time.perf_counter()

    def commit(ref: bytes, subject: str, ops: list[bytes], parent: int | None, merge: int | None = None) -> int:
        nonlocal mark, made
        mark += 1
        when = times[made]
        made += 1
        name, email, tz = authors.pick()
        authored = when - rng.randint(3600, 30 * 86400) if rng.random() < 0.15 else when
        cname, cemail, ctz = rng.choice(maintainers) if rng.random() < 0.3 else (name, email, tz)
        head = [b"commit %s\nmark :%d\n" % (ref, mark)]
        head.append(b"author %s <%s> %d %s\n" % (name, email, authored, tz))
        head.append(b"committer %s <%s> %d %s\n" % (cname, cemail, when, ctz))
        body = subject.encode() + b"\n\nSigned-off-by: " + name + b" <" + email + b">\n"
        r = rng.random()
        if r < 0.004:  # Latin-1 message, declared
            head.append(b"encoding ISO-8859-1\n")
            body = subject.encode() + b"\n\nR\xe9sum\xe9: d\xe9j\xe0 vu, na\xefve caf\xe9.\n"
            stats["latin1 msgs"] += 1
        elif r < 0.008:  # Latin-1 message, undeclared (git assumes UTF-8: it is not)
            body = subject.encode() + b" (na\xefve)\n"
            stats["latin1 msgs"] += 1
        head.append(data(body))
        if parent is not None:
            head.append(b"from :%d\n" % parent)
        if merge is not None:
            head.append(b"merge :%d\n" % merge)
        w.write(b"".join(head) + b"".join(ops) + b"\n")
        return mark

    def modify(path: bytes, tag: bytes, store: bool = True) -> bytes:
        prefix = quote(path) if path.startswith(b'"') else path
        return b"M 100644 inline " + prefix + b"\n" + data(tree.edit(path, tag, store))

    def write_file(path: bytes) -> bytes:
        return b"M 100644 inline " + path + b"\n" + data(tree.text(path))

    def subject_for(path: bytes) -> str:
        area = path.split(b"/")[-2].decode("utf-8", "replace") if b"/" in path else "top"
        return f"{area}: {rng.choice(VERBS)} {rng.choice(THINGS)}"

    # the initial import: an eighth of the final tree, plus the special files
    for _ in range(max(100, target_files // 8)):
        tree.add(tree.new_name())
    tree.add(HOT_OLD, [b"int engine_%d(void) { return %d; }" % (k, k) for k in range(150)])
    tree.add(HOT_PAIR, [b"int engine_%d(void);" % k for k in range(40)])
    tree.add(LATIN1_FILE, [b"Caf\xe9 notes, line %d" % k for k in range(20)])
    tree.add(SPACED_FILE, [b"Na\xc3\xafve r\xc3\xa9sum\xc3\xa9, line %d" % k for k in range(20)])
    main_tip: int | None = commit(b"refs/heads/main", "Initial import", [write_file(p) for p in tree.paths], None)

    topics: list[Topic] = []
    locked: set[bytes] = set()
    maint_tip: int | None = None
    hot = HOT_OLD
    hot_rename_at = n_commits // 2
    folder_rename_at = int(n_commits * 0.7)
    mass_at = [int(n_commits * f) for f in (0.85, 0.62, 0.4, 0.15)]  # popped from the end
    maint_at = int(n_commits * 0.9)
    grow_rate = (target_files - len(tree.paths)) / n_commits
    topic_serial = itertools.count(1)
    last_report = t0

    def pick_files(k: int) -> list[bytes]:
        """k files, mostly from one folder (what makes co-edits meaningful), none a topic holds."""
        folder = rng.choice(tree.folders).encode() + b"/"
        sample = [p for p in rng.sample(tree.paths, min(len(tree.paths), 60)) if p not in locked]
        near = [p for p in sample if p.startswith(folder)]
        chosen = set(near[: max(1, k * 2 // 3)])
        for p in sample:
            if len(chosen) >= k:
                break
            chosen.add(p)
        return sorted(chosen)

    while made < n_commits:
        if time.perf_counter() - last_report > 30:
            last_report = time.perf_counter()
            print(f"  {made:,} commits, {last_report - t0:.0f}s", file=sys.stderr, flush=True)
        tag = b"c%d" % made
        left = n_commits - made
        # -- a topic branch finishes: merge it (needs 1 commit) --------------------------------------------------
        done = [t for t in topics if t.left <= 0]
        if done:
            t = done[0]
            topics.remove(t)
            locked.difference_update(t.files)
            ops = [write_file(p) for p in sorted(t.touched) if p in tree.content]
            main_tip = commit(b"refs/heads/main", f"Merge branch '{t.name}'", ops, main_tip, merge=t.tip)
            stats["merges"] += 1
            continue
        # -- a commit on an open topic ---------------------------------------------------------------------------
        if topics and left > len(topics) + 1 and rng.random() < 0.25:
            t = rng.choice(topics)
            chosen = sorted(set(rng.sample(t.files, rng.randint(1, len(t.files)))))
            t.touched.update(chosen)
            t.tip = commit(b"refs/nagent-tmp/topics", subject_for(chosen[0]), [modify(p, tag) for p in chosen], t.tip)
            t.left -= 1
            continue
        # -- open a topic (forked from the mainline as it is now) ------------------------------------------------
        if len(topics) < 8 and left > 20 and rng.random() < 0.1:
            files = [p for p in pick_files(rng.randint(1, 4)) if p not in SPECIAL]
            if files:
                name = f"{rng.choice(['fix', 'feature', 'topic', 'wip'])}/{rng.choice(AREAS)}-{next(topic_serial)}"
                assert main_tip is not None
                topics.append(Topic(name, main_tip, rng.randint(1, 6), files))
                locked.update(files)
            # no commit made: fall through to a mainline commit
        # -- maint: a branch forked at 90 %, fixes of its own, never merged back ---------------------------------
        if made >= maint_at and maint_tip is None:
            maint_tip = main_tip
        if maint_tip is not None and rng.random() < 0.01:
            chosen = [p for p in pick_files(1) if p not in SPECIAL][:1] or [tree.paths[0]]
            ops = [modify(p, tag, store=False) for p in chosen if p in tree.content]
            maint_tip = commit(b"refs/heads/maint", "maint: " + subject_for(chosen[0]), ops, maint_tip)
            continue
        # -- mainline ---------------------------------------------------------------------------------------------
        if made >= hot_rename_at and hot == HOT_OLD:
            tree.add(HOT, tree.remove(HOT_OLD))
            hot = HOT
            main_tip = commit(
                b"refs/heads/main", "core: move the engine under src/core", [b"R %s %s\n" % (HOT_OLD, HOT)], main_tip
            )
            stats["renames"] += 1
            continue
        if made >= folder_rename_at and folder_rename_at >= 0:
            folder_rename_at = -1
            src = b"docs/guide/"
            moved = [
                p for p in list(tree.paths) if p.startswith(src) and p.count(b"/") == 2 and p not in locked | SPECIAL
            ]
            ops = []
            for p in moved:
                new = b"documentation/" + p[len(b"docs/") :]
                tree.add(new, tree.remove(p))
                ops.append(b"R %s %s\n" % (quote(p), quote(new)))
            if ops:
                stats["renames"] += len(ops)
                main_tip = commit(b"refs/heads/main", f"docs: move {len(ops)} pages to documentation/", ops, main_tip)
                continue
        if mass_at and made >= mass_at[-1]:
            mass_at.pop()
            free = [p for p in tree.paths if p not in locked]
            chosen = sorted(rng.sample(free, min(len(free), max(300, len(free) // 5))))
            main_tip = commit(
                b"refs/heads/main", "style: reformat the whole tree", [modify(p, tag) for p in chosen], main_tip
            )
            stats["mass"] += 1
            continue
        r = rng.random()
        if r < grow_rate * 1.1:  # a new file (sometimes with a header next to it)
            path = tree.new_name()
            if path in tree.content:
                continue
            ops = [b"M 100644 inline " + path + b"\n" + data(tree.add(path))]
            stats["adds"] += 1
            main_tip = commit(
                b"refs/heads/main", f"add {path.rsplit(b'/', 1)[-1].decode('utf-8', 'replace')}", ops, main_tip
            )
            continue
        r -= grow_rate * 1.1
        if r < 0.0015:  # a rename, half the time with an edit
            old = next((p for p in pick_files(3) if p not in SPECIAL), None)
            if old is None:
                continue
            new = tree.new_name()
            if new in tree.content:
                continue
            tree.add(new, tree.remove(old))
            ops = [b"R %s %s\n" % (quote(old), quote(new))]
            if rng.random() < 0.5:
                ops.append(modify(new, tag))
            stats["renames"] += 1
            main_tip = commit(
                b"refs/heads/main", f"rename {old.rsplit(b'/', 1)[-1].decode('utf-8', 'replace')}", ops, main_tip
            )
            continue
        r -= 0.0015
        if r < 0.001:  # a deletion
            gone = next((p for p in pick_files(3) if p not in SPECIAL), None)
            if gone is None or len(tree.paths) < 50:
                continue
            tree.remove(gone)
            stats["deletes"] += 1
            main_tip = commit(b"refs/heads/main", "remove dead code", [b"D " + gone + b"\n"], main_tip)
            continue
        r = rng.random()
        k = (
            1
            if r < 0.6
            else rng.randint(2, 5)
            if r < 0.92
            else rng.randint(6, 15)
            if r < 0.985
            else rng.randint(16, 60)
        )
        if r > 0.9995:
            k = rng.randint(80, 300)
        chosen = set(pick_files(k))
        x = rng.random()
        if x < 0.03:
            chosen.add(hot)
            if rng.random() < 0.5:
                chosen.add(HOT_PAIR)
        elif x < 0.035:
            chosen.add(LATIN1_FILE)
        elif x < 0.038:
            chosen.add(SPACED_FILE)
        paths = sorted(chosen)
        main_tip = commit(b"refs/heads/main", subject_for(paths[0]), [modify(p, tag) for p in paths], main_tip)
        if rng.random() < 0.002:  # a release tag
            stats["tags"] += 1
            w.write(b"reset refs/tags/v%d.%d\nfrom :%d\n\n" % (stats["tags"] // 10 + 1, stats["tags"] % 10, main_tip))

    w.write(b"done\n")
    w.close()
    if proc.wait() != 0:
        print("git fast-import failed", file=sys.stderr)
        return 1
    imported = time.perf_counter() - t0
    subprocess.run(["git", "-C", str(out), "update-ref", "-d", "refs/nagent-tmp/topics"], check=True, env=env)
    subprocess.run(["git", "-C", str(out), "reset", "-q", "--hard", "main"], check=True, env=env)
    if args.repack:
        subprocess.run(["git", "-C", str(out), "repack", "-q", "-a", "-d", "-f"], check=True, env=env)
    day = time.strftime("%Y-%m-%d", time.gmtime(times[0]))
    print(
        f"made {made:,} commits ({stats['merges']:,} merges, {stats['renames']:,} renames, {stats['adds']:,} files "
        f"added, {stats['deletes']:,} deleted, {stats['mass']} mass commits, {stats['tags']} tags, "
        f"{stats['latin1 msgs']} Latin-1 messages) by {len(authors.people):,} authors, {len(tree.paths):,} files, "
        f"{day} .. --end {end}, in {imported:.0f}s (+{time.perf_counter() - t0 - imported:.0f}s checkout) at {out}"
    )
    print("branches: main (checked out), maint (forked at 90 %); measure e.g.:")
    files = [HOT, HOT_PAIR, LATIN1_FILE, SPACED_FILE]
    print("  --files " + " ".join(repr(os.fsdecode(p)) if b" " in p else os.fsdecode(p) for p in files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
