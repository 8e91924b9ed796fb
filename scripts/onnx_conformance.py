"""Run ONNX's node conformance cases through ``asgrad.onnx.load`` and print the table.

Usage:
    python scripts/onnx_conformance.py                 the table by op type, then the totals
    python scripts/onnx_conformance.py --cases STATUS  also list the cases with STATUS
                                                       (fail, refused, error), and why
    python scripts/onnx_conformance.py --op Flatten    only the cases of these op types

The cases ship with the ``onnx`` wheel (``onnx.backend.test.case.node``); see
``asgrad.onnx.conformance`` for what each status means.
"""

from __future__ import annotations

import argparse
import time

from asgrad.onnx.conformance import STATUSES, collect_cases, op_table, op_types, run_cases, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", action="append", choices=STATUSES[1:], default=[])
    parser.add_argument("--op", action="append", default=[], help="op types to run (default all)")
    args = parser.parse_args()
    cases = collect_cases()
    if args.op:
        kinds = op_types(cases)
        cases = [c for c in cases if kinds[c.name] in args.op]
    start = time.perf_counter()
    results = run_cases(cases)
    seconds = time.perf_counter() - start
    print("| op type | cases | holdable | pass | fail | refused | error | passes |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|")
    for row in op_table(results):
        c = row.counts
        total = sum(c.values())
        mark = "yes" if row.passes else ""
        print(
            f"| {row.op_type} | {total} | {row.holdable} | {c['pass']} | {c['fail']}"
            f" | {c['refused']} | {c['error']} | {mark} |"
        )
    print()
    print(summary(results))
    print(f"({seconds:.1f} s)")
    for status in args.cases:
        print(f"\n{status}:")
        for r in results:
            if r.status == status:
                print(f"  {r.name} [{r.op_type}]: {r.detail.splitlines()[0][:300]}")


if __name__ == "__main__":
    main()
