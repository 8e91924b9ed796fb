"""A long LSTM as one ``scan`` against the same LSTM unrolled: graph size, compile time, memory.

    python benchmarks/scan_vs_unrolled.py [--steps 512] [--batch 8] [--hidden 128]
                                          [--backend cpu] [--runs 3]

Both models are ``nn.LSTM``'s weights on the same input: ``scan`` is the layer
itself (one scan node), ``unrolled`` calls ``nn.LSTMCell`` with those weights once
per time step (``steps`` copies of the cell in the graph). For each it measures the
graph's nodes once the training step is compiled (forward, gradients, Adam's update),
the seconds to build the forward graph, the seconds to compile the training step
(gradients and schedule), the seconds of its first run (where the CPU backend
generates its code), the seconds per training step after that (the fastest of
``runs``, one BLAS thread), and the peak of Python-tracked memory (numpy arrays
included, via ``tracemalloc``) over building, compiling and the first step. Prints
one JSON line per variant.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._threads import blas_threads
from asgrad.tensor import Graph, Tensor


def _model(steps: int, batch: int, features: int, hidden: int, variant: str) -> tuple[Any, ...]:
    lstm = nn.LSTM(features, hidden, rng=0)
    g = Graph(variant)
    x = g.input("x", (steps, batch, features), free=())
    target = g.input("target", (steps, batch, hidden), free=())
    if variant == "scan":
        out, _ = lstm(x)
    else:
        cell = nn.LSTMCell(features, hidden, rng=0)
        cell.load_state_dict({k[: -len("_l0")]: v for k, v in lstm.state_dict().items()})
        h: Tensor | None = None
        c: Tensor | None = None
        outs = []
        for t in range(steps):
            h, c = cell(x[t], None if h is None else (h, c))
            outs.append(h)
        from asgrad.tensor import stack

        out = stack(outs, axis=0)
        lstm = cell
    loss = ((out - target) * (out - target)).mean()
    return g, x, target, loss, lstm


def measure(
    variant: str, steps: int, batch: int, hidden: int, backend: str, runs: int
) -> dict[str, Any]:
    features = 32
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    g, _, _, loss, model = _model(steps, batch, features, hidden, variant)
    optimizer = nn.Adam(model.parameters(), lr=1e-3)
    built = time.perf_counter()
    step = optimizer.compile(loss, backend=backend)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((steps, batch, features)).astype(np.float32),
        "target": rng.standard_normal((steps, batch, hidden)).astype(np.float32),
    }
    compiled = time.perf_counter()
    first = float(step(feeds)[0])
    ran = time.perf_counter()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step(feeds)
        times.append(time.perf_counter() - t0)
    return {
        "variant": variant,
        "steps": steps,
        "batch": batch,
        "hidden": hidden,
        "backend": backend,
        "graph_nodes": len(g.nodes),
        "build_s": round(built - start, 3),
        "compile_s": round(compiled - built, 3),
        "first_step_s": round(ran - compiled, 3),
        "step_s": round(min(times), 4),
        "peak_mib": round(peak / 2**20, 1),
        "first_loss": round(first, 5),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--variants", default="scan,unrolled")
    args = p.parse_args()
    with blas_threads(1):
        for variant in args.variants.split(","):
            result = measure(variant, args.steps, args.batch, args.hidden, args.backend, args.runs)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
