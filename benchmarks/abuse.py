"""The full abuse campaign (issue 12; DESIGN §12) against ONE long-lived nagent-lsp process, with its figures.

    .venv/bin/python benchmarks/abuse.py                 # 10,000 fuzz cases, a 300 MB file, a 10 MB URI
    .venv/bin/python benchmarks/abuse.py --fuzz 50000 --seed 7 --keep

Random and malformed requests over raw stdio (garbage frames, broken headers, wrong lengths, bad envelopes, bad
params, deep nesting, cancellations), path attacks, crafted split indexes, provider faults, shell abuse and special
files, with a canary API key in the server's environment that is then searched for (plain, reversed, base64, hex)
in every byte the server wrote, its logs, every file under the campaign's folders and every model request. The
campaign itself is tests/abuse/campaign.py; the test suite runs a bounded version of it (tests/abuse).

Exit status 1 when a request went unanswered, a traceback or the canary showed up, an attack got through or the
server did not survive; the figures are printed either way.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.abuse.campaign import Report, Size, run_campaign  # noqa: E402


def problems(report: Report) -> list[str]:
    found = []
    for label, items in (
        ("unanswered", report.unanswered),
        ("wrong code", report.wrong_codes),
        ("internal error", report.internal_errors),
        ("traceback", report.tracebacks),
        ("python text", report.python_text),
        ("canary", report.canary_hits),
        ("secret", report.secret_hits),
        ("broken frame", report.broken_frames),
        ("attack", [f"{a.name} (item {a.item}): {a.detail}" for a in report.failed_attacks()]),
    ):
        found += [f"{label}: {item}" for item in items]
    if not report.alive_at_end:
        found.append("the server did not answer at the end")
    if report.exit_code != 0:
        found.append(f"exit code {report.exit_code}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuzz", type=int, default=10_000, help="fuzz cases (default 10000)")
    parser.add_argument("--seed", type=int, default=12, help="the fuzz generator's seed")
    parser.add_argument("--bounded", action="store_true", help="the test suite's bounded size instead")
    parser.add_argument("--keep", action="store_true", help="keep the campaign's folder (printed) for inspection")
    args = parser.parse_args()
    size = Size.bounded() if args.bounded else Size.full(args.fuzz)
    size = replace(size, seed=args.seed)
    base = Path(tempfile.mkdtemp(prefix="nagent-abuse-"))
    try:
        report = run_campaign(base, size)
    finally:
        if args.keep:
            print(f"campaign folder kept: {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(report.figures())
    print("  fuzz cases by family: " + ", ".join(f"{k} {v}" for k, v in sorted(report.fuzz_families.items())))
    found = problems(report)
    for line in found[:40]:
        print(f"  PROBLEM {line}")
    if len(found) > 40:
        print(f"  … and {len(found) - 40} more")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
