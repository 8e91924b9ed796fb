"""Where a workload's CPU training step spends its time, op by op.

    python benchmarks/profile_ops.py mlp [--steps 50] [--top 25] [--cpu-time]

Builds the workload as ``run.py`` does, then runs the function the CPU executor
generated for it with a timer around every line; prints the time per op kind and
the costliest lines with their shapes (each line's median over the steps). The timers
add a little per line, so the
total is a bit above the compiled step's. ``--cpu-time`` times by the process's CPU
time instead of the wall clock: on a loaded machine a line longer than the scheduler's
time slice is descheduled part of the time, which the wall clock counts and the CPU
clock does not (with one thread, ``OPENBLAS_NUM_THREADS=1``, it is the op's own cost;
with more it adds the threads' times, spinning included).
"""

from __future__ import annotations

import argparse
import importlib
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
    p.add_argument("--cpu-time", action="store_true", help="time by CPU time, not wall time")
    args = p.parse_args(argv)

    # asgrad before numpy, as a program importing asgrad first: it sets OpenBLAS's
    # polling time before numpy loads OpenBLAS (asgrad.tensor._openblas).
    importlib.import_module("asgrad.tensor")
    import numpy as np

    import asgrad_workloads
    from asgrad.tensor import Program
    from asgrad.tensor.cpu import CPUExecutable

    w = asgrad_workloads.build(args.workload, "cpu")
    for _ in range(3):
        w.step()
    program: Program = w.program
    schedule = program.schedule
    feeds = program._prepare(w.feeds)

    clock = time.process_time if args.cpu_time else time.perf_counter
    start = clock()
    for _ in range(args.steps):
        w.step()
    compiled = (clock() - start) / args.steps

    # Time every line of the generated function: the code that really runs.
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    node_of = {f"v{i}": node for i, node in enumerate(schedule.nodes)}
    lines = fn.source.splitlines()
    timed = [lines[0]]
    labels: list[str] = []
    sources: list[str] = []
    for line in lines[1:]:
        target = line.strip().split(" = ", 1)[0]
        if target in node_of and " = " in line:
            indent = line[: len(line) - len(line.lstrip())]
            timed.append(f"{indent}_t = _pc(); {line.strip()}; _acc[{len(labels)}] += _pc() - _t")
            labels.append(target)
            sources.append(line.strip())
        else:
            timed.append(line)
    env = fn.__globals__
    env["_pc"] = clock
    env["_acc"] = acc = [0.0] * len(labels)
    exec(compile("\n".join(timed), "<timed schedule>", "exec"), env)
    timed_run = env["run"]
    samples = []
    for _ in range(args.steps):
        acc[:] = [0.0] * len(acc)
        timed_run(feeds)
        samples.append(list(acc))
    # The median step of each line: a shared machine stalls threads now and then.
    acc[:] = [float(np.median(col)) * args.steps for col in zip(*samples, strict=True)]
    per_op: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    per_node: list[tuple[float, Any, str]] = []
    for label, t, line in zip(labels, acc, sources, strict=True):
        node = node_of[label]
        per_op[node.op] += t
        counts[node.op] += 1
        per_node.append((t, node, line))
    total = sum(per_op.values()) / args.steps
    print(
        f"{args.workload}: compiled step {compiled * 1e3:.3f} ms; lines {total * 1e3:.3f} ms"
        f" over {len(labels)} lines ({len(schedule.nodes)} nodes)"
    )
    print(f"{'op':<28} {'count':>5} {'ms/step':>9} {'share':>6}")
    for op, t in sorted(per_op.items(), key=lambda kv: -kv[1]):
        share = t / args.steps / total
        print(f"{op:<28} {counts[op]:>5} {t / args.steps * 1e3:>9.3f} {share:>6.1%}")
    print(f"\ncostliest lines ({args.top}):")
    for t, n, line in sorted(per_node, key=lambda r: -r[0])[: args.top]:
        shapes = ", ".join(f"{x.dtype}{list(x.shape)}" for x in n.inputs)
        print(f"  {t / args.steps * 1e3:8.3f} ms  {n.op}({shapes}) -> {n.type}")
        print(f"               {line.strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
