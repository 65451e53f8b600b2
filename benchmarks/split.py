"""Split and merge throughput (MB/s) beside a floor measured in the same run.

Floor: read the file and split it into lines (bytes.splitlines), the least any line-aware splitter must do.
  split (memory): plan segments at natural boundaries and cut the bytes (what nagent.split computes)
  split (disk):   the same plus writing every segment and index.json atomically (fsync per file)
  merge:          nagent.patch's merge: read the index and every segment, validate hash and contiguity, join
Goal: >= 50 MB/s, or within 3x of the floor. Usage: python benchmarks/split.py [--sizes 1,10] [--repeat 3]
[--max-file-bytes N]. Split and merge both obey maxFileBytes (the server's default unless --max-file-bytes says
otherwise), as the server does: a size over it is reported and skipped, not measured.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from nagent_lsp.agent.splits import plan_patch, split_text  # noqa: E402
from nagent_lsp.config.settings import DEFAULT_MAX_FILE_BYTES  # noqa: E402
from nagent_lsp.text.segments import plan_segments  # noqa: E402

MB = 1024 * 1024


def gen_py(rng: random.Random, i: int) -> str:
    return (
        f'@decorator\ndef function_{i}(value, other=None):\n    """Doc é {i}."""\n'
        f"    if value > {rng.randint(0, 99)}:\n        return value * {i}\n\n    return other\n\n\n"
        + (f"class Thing{i}:\n    def method(self):\n        return {i}\n\n\n" if i % 5 == 0 else "")
    )


def gen_cpp(rng: random.Random, i: int) -> str:
    return (
        f"// function {i}\nstatic int function_{i}(int value) {{\n    if (value > {rng.randint(0, 99)}) {{\n"
        f"        return value * {i};\n    }}\n\n    return value;\n}}\n\n"
    )


def gen_json(rng: random.Random, i: int) -> str:
    return (
        json.dumps({f"key_{i}": {"a": [i, rng.randint(0, 9)], "b": f"text é {i}", "c": {"d": True}}}, indent=2)[2:-2]
        + ",\n"
    )


def gen_md(rng: random.Random, i: int) -> str:
    return f"## Section {i}\n\n" + "Some prose with a word or two, é and 😀.\n" * rng.randint(2, 8) + "\n"


def gen_txt(rng: random.Random, i: int) -> str:
    return f"A line of plain text in a log file, entry number {i}\r\n" + ("\r\n" if i % 7 == 0 else "")


GENERATORS = {"py": gen_py, "cpp": gen_cpp, "json": gen_json, "md": gen_md, "txt": gen_txt}


def make_text(kind: str, size: int) -> str:
    rng = random.Random(42)
    parts, total, i = [], 0, 0
    if kind == "json":
        parts.append("{\n")
    while total < size:
        piece = GENERATORS[kind](rng, i)
        parts.append(piece)
        total += len(piece.encode())
        i += 1
    if kind == "json":
        parts[-1] = parts[-1].rstrip(",\n") + "\n}\n"
    return "".join(parts)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10", help="file sizes in MB, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--max-file-bytes", type=int, default=DEFAULT_MAX_FILE_BYTES, help="maxFileBytes for split and merge"
    )
    args = parser.parse_args()
    limit = args.max_file_bytes
    sizes = [float(s) for s in args.sizes.split(",")]
    header = (
        f"{'type':<5} {'size':>6} {'segs':>5} {'floor':>9} {'split mem':>10} {'split disk':>11} {'merge':>9}"
        "   ratios (floor/x)"
    )
    print(header)
    print("-" * len(header))
    worst = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for size_mb in sizes:
            for kind in GENERATORS:
                text = make_text(kind, int(size_mb * MB))
                source = root / f"sample-{kind}-{size_mb:g}.{kind}"
                source.write_bytes(text.encode())
                mb = len(text.encode()) / MB
                if len(text.encode()) > limit:
                    print(
                        f"{kind:<5} {mb:>5.1f}M  skipped: {len(text.encode())} bytes is more than maxFileBytes "
                        f"({limit}), which split and patch both refuse; pass --max-file-bytes to measure it"
                    )
                    continue
                floor = best(lambda: source.read_bytes().splitlines(keepends=True), args.repeat)

                def split_mem() -> int:
                    data = source.read_bytes()
                    segs = plan_segments(data, kind)
                    blobs = [data[s.start_byte : s.end_byte] for s in segs]
                    return len(blobs)

                t_mem = best(split_mem, args.repeat)
                results = []
                t_disk = best(
                    lambda: results.append(
                        split_text(
                            source.read_bytes().decode(), source, root / "splits", split_type=kind, max_bytes=limit
                        )
                    ),
                    args.repeat,
                )
                index_path = results[-1].index_path
                nsegs = results[-1].index["segment_count"]

                def merge() -> None:
                    plan = plan_patch(index_path, source.read_bytes().decode(), max_bytes=limit)
                    assert not plan.changed

                t_merge = best(merge, args.repeat)
                rates = [mb / t for t in (floor, t_mem, t_disk, t_merge)]
                ratios = [t / floor for t in (t_mem, t_disk, t_merge)]
                worst.append((kind, size_mb, rates[1], ratios[0], rates[3], ratios[2]))
                print(
                    f"{kind:<5} {mb:>5.1f}M {nsegs:>5} {rates[0]:>7.0f}MB/s {rates[1]:>8.0f}MB/s {rates[2]:>9.0f}MB/s"
                    f" {rates[3]:>7.0f}MB/s   mem {ratios[0]:.1f}x  disk {ratios[1]:.1f}x  merge {ratios[2]:.1f}x"
                )
    if not worst:
        print("\nnothing measured: every size is over maxFileBytes")
        return
    ok = all(
        (r_split >= 50 or q_split <= 3) and (r_merge >= 50 or q_merge <= 3)
        for _, _, r_split, q_split, r_merge, q_merge in worst
    )
    print(f"\ngoal (split in memory and merge >= 50 MB/s or within 3x of the floor): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
