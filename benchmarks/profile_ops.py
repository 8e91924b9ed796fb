"""Where a workload's CPU training step spends its time, op by op.

    python benchmarks/profile_ops.py mlp [--steps 50] [--top 25]

Builds the workload as ``run.py`` does, then interprets its compiled schedule node
by node with the same kernels, timing each call; prints the time per op kind (and
the costliest single nodes with their shapes). Interpretation adds a little Python
per node, so the total is a bit above the compiled step's.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)

    import asgrad_workloads
    from asgrad.tensor import Program
    from asgrad.tensor.registry import get_op

    w = asgrad_workloads.build(args.workload, "cpu")
    for _ in range(3):
        w.step()
    program: Program = w.program
    schedule = program.schedule
    feeds = program._prepare(w.feeds)

    start = time.perf_counter()
    for _ in range(args.steps):
        w.step()
    compiled = (time.perf_counter() - start) / args.steps

    kernels: list[Any] = []
    for node in schedule.nodes:
        if node.op in ("input", "parameter", "constant"):
            kernels.append(None)
        else:
            k = get_op(node.op).kernel
            kernels.append(functools.partial(k, **node.attrs) if node.attrs else k)
    per_op: dict[str, float] = defaultdict(float)
    per_node = [0.0] * len(schedule.nodes)
    for _ in range(args.steps):
        values: dict[int, Any] = {}
        for i, node in enumerate(schedule.nodes):
            if node.op == "input":
                values[node.id] = feeds[node.name]
            elif node.op == "parameter":
                values[node.id] = node.attrs["variable"].value
            elif node.op == "constant":
                values[node.id] = node.attrs["value"]
            else:
                ins = [values[n.id] for n in node.inputs]
                t0 = time.perf_counter()
                values[node.id] = kernels[i](*ins)
                dt = time.perf_counter() - t0
                per_op[node.op] += dt
                per_node[i] += dt
    total = sum(per_op.values()) / args.steps
    print(
        f"{args.workload}: compiled step {compiled * 1e3:.3f} ms; kernels {total * 1e3:.3f} ms"
        f" over {len(schedule.nodes)} nodes"
    )
    print(f"{'op':<28} {'count':>5} {'ms/step':>9} {'share':>6}")
    counts: dict[str, int] = defaultdict(int)
    for node in schedule.nodes:
        counts[node.op] += 1
    for op, t in sorted(per_op.items(), key=lambda kv: -kv[1]):
        print(
            f"{op:<28} {counts[op]:>5} {t / args.steps * 1e3:>9.3f} {t / args.steps / total:>6.1%}"
        )
    print(f"\ncostliest nodes ({args.top}):")
    order = sorted(range(len(per_node)), key=lambda i: -per_node[i])[: args.top]
    for i in order:
        n = schedule.nodes[i]
        shapes = ", ".join(f"{x.dtype}{list(x.shape)}" for x in n.inputs)
        print(
            f"  {per_node[i] / args.steps * 1e3:8.3f} ms  {n.op}({shapes}) -> {n.type}"
            f"  {n.location}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
