"""Print the reward parity table (consumer × task) from a folder of ``<consumer>.json`` files, and fail when
two consumers differ by more than 1e-9 or an expected consumer is missing (docs/environment.md, "Parity").

    python scripts/parity_table.py DIR                       # expects datadojo.testing.parity.CONSUMERS
    python scripts/parity_table.py DIR --expect eval,train_rl
    python scripts/parity_table.py DIR --ran "eval train_rl trl verl llamafactory"   # CONSUMERS that ran
"""

from __future__ import annotations

import argparse
import sys

from datadojo.testing.parity import CONSUMERS, TOLERANCE, read_rows, table_problems


def format_table(files: dict[str, dict]) -> str:
    """A Markdown table: one row per ``task/sample``, one column per consumer (the total; ``—`` not run)."""
    consumers = sorted(files)
    keys = sorted({k for f in files.values() for k in f["rows"]})
    lines = ["| task/sample | " + " | ".join(consumers) + " |", "|---" * (len(consumers) + 1) + "|"]
    for key in keys:
        cells = []
        for c in consumers:
            row = files[c]["rows"].get(key)
            cells.append("—" if row is None else f"{row['total']:.12g}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", help="folder of <consumer>.json files")
    parser.add_argument("--expect", default=None, help="comma-separated consumers that must have a file")
    parser.add_argument(
        "--ran",
        default=None,
        help="what ran (space-separated): the consumers of CONSUMERS among them must have a file",
    )
    args = parser.parse_args(argv)
    files = read_rows(args.folder)
    if args.expect is not None:
        expected = tuple(c for c in args.expect.split(",") if c)
    elif args.ran is not None:
        expected = tuple(c for c in CONSUMERS if c in args.ran.split())
    else:
        expected = CONSUMERS
    print(format_table(files))
    problems = table_problems(files, expected)
    if problems:
        print(f"\nparity FAILED ({len(problems)} problem(s), tolerance {TOLERANCE:g}):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    n = len({k for f in files.values() for k in f["rows"]})
    print(
        f"\nparity ok: {len(files)} consumers ({', '.join(sorted(files))}), {n} task/sample rows, within {TOLERANCE:g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
