"""A training step under ``memory_budget``: planned and measured peaks, step time, losses.

    python benchmarks/memory_budget.py [--device cpu|gpu] [--fraction 0.5] [--steps 30]
                                       [--layers 2] [--budget-mib MIB]

Builds the transformer example's model and step (``asgrad.examples.transformer``:
batch 32, context 64, width 64, 4 heads, AdamW with weight decay and gradient
clipping, on the bundled text), compiles it without a budget and with
``memory_budget`` at ``--fraction`` of the unbudgeted planned peak (or
``--budget-mib``), trains both from the same weights on the same batches (their steps alternated, so
that both see the same machine load), and prints
one JSON line: the planned peaks by category, the measured peaks (CPU: numpy's bytes
traced by ``tracemalloc`` at the peak of a run plus the scratch buffers the step holds
between runs; GPU: the bytes the step's plan took from the device pool, plus the
variables and the feeds), the median step times and their ratio, and whether every
loss was bit-identical. ``--layers 64`` builds a 64-block model; a budget it cannot
meet raises ``MemoryBudgetError``; with ``--budget-mib`` below the unbudgeted peak,
only the budgeted step is trained when the unbudgeted one does not fit
(``--skip-free``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--budget-mib", type=float, default=None)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--skip-free", action="store_true", help="train only the budgeted step")
    p.add_argument("--no-clip", action="store_true", help="AdamW without gradient clipping")
    p.add_argument(
        "--of-measured",
        action="store_true",
        help="--fraction of the unbudgeted GPU step's buffers (built, not run), not of its plan",
    )
    args = p.parse_args(argv)

    from asgrad import nn
    from asgrad.examples.text import CharVocab, load_text, random_windows, split_ids
    from asgrad.examples.transformer import CharTransformer
    from asgrad.tensor import Graph, Program

    text = load_text()
    vocab = CharVocab(text)
    train_ids, _ = split_ids(vocab.encode(text), 0.1)
    context = 64

    def build(budget: int | None) -> tuple[Program, float]:
        model = CharTransformer(len(vocab), 64, 4, args.layers, context, seed=0)
        g = Graph("lm-train")
        x = g.input("x", (args.batch_size, context), "int64")
        y = g.input("y", (args.batch_size, context), "int64")
        loss = nn.cross_entropy(model(x), y, axis=-1)
        clip = None if args.no_clip else 1.0
        opt = nn.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, clip_grad_norm=clip)
        start = time.perf_counter()
        step = opt.compile(loss, backend=args.device, memory_budget=budget)
        return step, time.perf_counter() - start

    rng = np.random.default_rng(0)
    batches = []
    for _ in range(args.steps):
        xb, yb = random_windows(train_ids, args.batch_size, context, rng)
        batches.append({"x": xb, "y": yb})
    free, free_compile = build(None)
    unbudgeted = free.memory()
    if args.budget_mib is not None:
        budget = int(args.budget_mib * 2**20)
    elif args.of_measured:
        if args.device != "gpu":
            p.error("--of-measured is for --device gpu (a CPU measurement runs a step)")
        budget = int(_measured_peak(free, batches[0], args.device) * args.fraction)
    else:
        budget = int(unbudgeted.peak * args.fraction)
    budgeted, budgeted_compile = build(budget)
    result: dict[str, Any] = {
        "device": args.device,
        "layers": args.layers,
        "budget": budget,
        "planned_unbudgeted": unbudgeted.as_dict(),
        "planned_budgeted": budgeted.memory().as_dict(),
        "recomputed_nodes": sum(
            1 for n in budgeted.schedule.nodes if n.meta.get("role") == "recompute"
        ),
        "compile_s": {"unbudgeted": round(free_compile, 3), "budgeted": round(budgeted_compile, 3)},
    }
    programs = (
        {"budgeted": budgeted} if args.skip_free else {"unbudgeted": free, "budgeted": budgeted}
    )
    losses: dict[str, list[float]] = {name: [] for name in programs}
    times: dict[str, list[float]] = {name: [] for name in programs}
    for feeds in batches:  # alternated, so that both see the same machine load
        for name, step in programs.items():
            start = time.perf_counter()
            losses[name].append(float(step(feeds)[0]))
            times[name].append(time.perf_counter() - start)
    measured = {name: _measured_peak(s, batches[0], args.device) for name, s in programs.items()}
    result["measured_peak"] = measured
    result["step_ms_median"] = {
        k: round(1000 * statistics.median(v[min(3, len(v) - 1) :]), 2) for k, v in times.items()
    }
    if "unbudgeted" in programs:
        medians = result["step_ms_median"]
        result["step_time_ratio"] = round(medians["budgeted"] / medians["unbudgeted"], 3)
        result["losses_identical"] = losses["budgeted"] == losses["unbudgeted"]
    result["losses_first_last"] = {k: [v[0], v[-1]] for k, v in losses.items()}
    print(json.dumps(result))
    return 0


def _measured_peak(step: Any, feeds: dict[str, np.ndarray], device: str) -> int:
    """The measured peak bytes of one more run of ``step`` (it has run before)."""
    plan = step.memory()
    held = plan.parameters + plan.state + plan.inputs
    if device == "gpu":
        return int(held + step.executable.plan(feeds).scope.allocated_bytes)
    tracemalloc.start()
    try:
        step(feeds)
        _, transient = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(held + transient + step.executable.scratch_bytes(feeds))


if __name__ == "__main__":
    raise SystemExit(main())
