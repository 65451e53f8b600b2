"""Make a large synthetic git repository with `git fast-import` (one process, streamed), for benchmarks/history.py.

    python benchmarks/make_large_repo.py OUT_DIR [--commits 52000] [--files 4000] [--seed 7]

Shape (aimed at git.git-like statistics): ~4,000 files in nested folders; changeset sizes mostly 1-3 files with a long
tail (about 1.5 % touch 10-40 files, 0.1 % touch 60-300, and a handful of mass commits touching 600-2,000 files,
one of them a mass rename of a whole folder); single-file renames sprinkled through history; a hot file
(`src/core/engine.c`, renamed from `src/engine.c` half way) changed by ~5 % of commits; ~60 authors with a skewed
distribution; a topic branch merged (--no-ff style) every ~800 commits. Prints the hot file and counts at the end.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

HOT_OLD = "src/engine.c"
HOT = "src/core/engine.c"
START = 1420070400  # 2015-01-01


class Repo:
    def __init__(self, rng: random.Random, files: int):
        self.rng = rng
        self.content: dict[str, list[str]] = {}
        folders = [f"src/{a}" for a in ("net", "io", "ui", "db", "util", "auth", "api", "core", "cli", "cache")]
        folders += [f"{f}/{b}" for f in folders[:6] for b in ("impl", "tests", "gen")]
        folders += ["docs", "docs/guide", "tests", "tests/unit", "tests/integration", "scripts", "config"]
        self.folders = folders
        exts = [".c", ".h", ".py", ".md", ".txt", ".json"]
        for i in range(files):
            folder = rng.choice(folders)
            name = f"{folder}/mod{i:05d}{rng.choice(exts)}"
            self.content[name] = [f"// {name} line {k}" for k in range(rng.randint(5, 40))]
        self.content[HOT_OLD] = [f"int engine_{k}(void) {{ return {k}; }}" for k in range(200)]
        self.reindex()

    def reindex(self) -> None:
        self.paths = sorted(self.content)
        self.by_folder: dict[str, list[str]] = {}
        for p in self.paths:
            self.by_folder.setdefault(p.rsplit("/", 1)[0], []).append(p)

    def edit(self, path: str, tag: str) -> str:
        lines = self.content[path]
        r = self.rng.random()
        if r < 0.6 and lines:
            i = self.rng.randrange(len(lines))
            lines[i] = f"{lines[i].split(' /*')[0]} /* {tag} */"
        elif r < 0.9 or len(lines) < 10:
            lines.insert(self.rng.randrange(len(lines) + 1), f"// added in {tag}")
        else:
            del lines[self.rng.randrange(len(lines))]
        return "\n".join(lines) + "\n"


def data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--commits", type=int, default=52000)
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"{out} exists and is not empty", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(out)], check=True)
    rng = random.Random(args.seed)
    repo = Repo(rng, args.files)
    authors = [(f"Dev{i:02d} Person", f"dev{i:02d}@example.org") for i in range(60)]
    weights = [1.0 / (i + 1) ** 1.1 for i in range(60)]
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=out, stdin=subprocess.PIPE)
    w = proc.stdin
    assert w is not None
    mark = 0
    when = START
    hot_name = HOT_OLD
    sizes = {"1": 0, "2-5": 0, "6-30": 0, "31-300": 0, ">300": 0}
    renames = 0
    merges = 0
    t0 = time.perf_counter()

    def commit(branch: str, message: str, ops: list[bytes], parent: int | None, merge: int | None = None) -> int:
        nonlocal mark, when
        mark += 1
        when += rng.randint(600, 7200)
        name, email = rng.choices(authors, weights)[0]
        w.write(b"commit refs/heads/%s\nmark :%d\n" % (branch.encode(), mark))
        w.write(f"author {name} <{email}> {when} +0000\ncommitter {name} <{email}> {when} +0000\n".encode())
        w.write(data(message))
        if parent is not None:
            w.write(b"from :%d\n" % parent)
        if merge is not None:
            w.write(b"merge :%d\n" % merge)
        w.write(b"".join(ops))
        w.write(b"\n")
        return mark

    def modify(path: str, tag: str) -> bytes:
        return b"M 100644 inline " + path.encode() + b"\n" + data(repo.edit(path, tag))

    # the initial import: every file in one commit
    ops = [b"M 100644 inline " + p.encode() + b"\n" + data("\n".join(repo.content[p]) + "\n") for p in repo.paths]
    main_tip = commit("main", "Initial import", ops, None)
    made = 1
    mass_points = {int(args.commits * f) for f in (0.15, 0.35, 0.6, 0.8)}
    mass_rename_at = int(args.commits * 0.7)
    hot_rename_at = int(args.commits * 0.5)
    while made < args.commits:
        tag = f"c{made}"
        if made == hot_rename_at:
            repo.content[HOT] = repo.content.pop(HOT_OLD)
            repo.reindex()
            hot_name = HOT
            main_tip = commit(
                "main", "core: move the engine under src/core", [f"R {HOT_OLD} {HOT}\n".encode()], main_tip
            )
            renames += 1
            made += 1
            continue
        if made == mass_rename_at:
            moved = [p for p in repo.paths if p.startswith("docs/") and p.count("/") == 1]
            ops = []
            for p in moved:
                new = "documentation/" + p.split("/", 1)[1]
                repo.content[new] = repo.content.pop(p)
                ops.append(f"R {p} {new}\n".encode())
            repo.reindex()
            renames += len(moved)
            sizes[">300" if len(ops) > 300 else "31-300"] += 1
            main_tip = commit("main", f"docs: move {len(ops)} pages to documentation/", ops, main_tip)
            made += 1
            continue
        if made in mass_points:
            chosen = rng.sample(repo.paths, min(len(repo.paths), rng.randint(600, 2000)))
            main_tip = commit("main", "style: reformat the whole tree", [modify(p, tag) for p in chosen], main_tip)
            sizes[">300"] += 1
            made += 1
            continue
        if made % 800 == 0:  # a short topic branch merged with a merge commit
            base = main_tip
            tip = base
            touched: set[str] = set()
            for k in range(3):
                chosen = rng.sample(repo.paths, rng.randint(1, 3))
                touched.update(chosen)
                tip = commit("topic", f"topic {made}: step {k + 1}", [modify(p, f"{tag}t{k}") for p in chosen], tip)
                made += 1
            # the merge commit's tree = mainline + the topic's files (mainline did not move meanwhile)
            ops = [b"M 100644 inline " + p.encode() + b"\n" + data("\n".join(repo.content[p]) + "\n") for p in touched]
            main_tip = commit("main", f"Merge branch 'topic-{made}'", ops, main_tip, merge=tip)
            merges += 1
            made += 1
            continue
        if rng.random() < 0.002:  # a single-file rename, sometimes with an edit
            old = rng.choice([p for p in rng.sample(repo.paths, 20) if p != hot_name] or [repo.paths[0]])
            new = f"{rng.choice(repo.folders)}/renamed{made:06d}{Path(old).suffix}"
            repo.content[new] = repo.content.pop(old)
            repo.reindex()
            ops = [f"R {old} {new}\n".encode()]
            if rng.random() < 0.5:
                ops.append(modify(new, tag))
            main_tip = commit("main", f"rename {Path(old).name}", ops, main_tip)
            renames += 1
            sizes["1"] += 1
            made += 1
            continue
        r = rng.random()
        if r < 0.62:
            n = 1
        elif r < 0.93:
            n = rng.randint(2, 5)
        elif r < 0.985:
            n = rng.randint(6, 12)
        elif r < 0.999:
            n = rng.randint(13, 40)
        else:
            n = rng.randint(60, 300)
        # locality: most multi-file commits stay inside one folder (that is what makes co-edits meaningful)
        folder = rng.choice(repo.folders)
        near = repo.by_folder.get(folder) or repo.paths
        chosen = set(rng.sample(near, min(len(near), max(1, n * 2 // 3))))
        while len(chosen) < n:
            chosen.add(rng.choice(repo.paths))
        if rng.random() < 0.05:
            chosen.add(hot_name)
            if rng.random() < 0.5:
                chosen.add("src/core/" + "mod_hotpair.h")
                repo.content.setdefault("src/core/mod_hotpair.h", ["// paired header"])
                if "src/core/mod_hotpair.h" not in repo.paths:
                    repo.reindex()
        ops = [modify(p, tag) for p in sorted(chosen)]
        k = len(ops)
        sizes["1" if k == 1 else "2-5" if k <= 5 else "6-30" if k <= 30 else "31-300" if k <= 300 else ">300"] += 1
        main_tip = commit("main", f"{Path(sorted(chosen)[0]).stem}: change {made}", ops, main_tip)
        made += 1
    w.write(b"done\n")
    w.close()
    if proc.wait() != 0:
        print("git fast-import failed", file=sys.stderr)
        return 1
    subprocess.run(["git", "-C", str(out), "reset", "-q", "--hard", "main"], check=True)
    subprocess.run(["git", "-C", str(out), "branch", "-q", "-D", "topic"], check=False)
    print(f"made {made} commits ({merges} merges, {renames} renames) in {time.perf_counter() - t0:.1f}s at {out}")
    print(f"changeset sizes: {sizes}")
    print(f"hot file: {HOT} (was {HOT_OLD})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
