"""An LSTM training step on the CPU, asgrad against PyTorch eager on the same weights.

    python benchmarks/lstm_vs_torch.py [--steps 128] [--batch 16] [--features 32]
                                       [--hidden 64] [--layers 2] [--timed 20]
                                       [--rounds 3] [--threads 2] [--mode gru]

A ``num_layers``-layer ``nn.LSTM`` (or ``--mode gru``: ``nn.GRU``) on a
``(steps, batch, features)`` sequence, a mean squared error against a target of
the outputs' shape, Adam (lr 1e-3): forward, gradients and update in one step. asgrad
runs the compiled CPU path from the first step (``ASGRAD_CPU_JIT=1`` unless set);
PyTorch (imported when it is installed; never a dependency) gets asgrad's initial
weights, through ``torch_model.load_state_dict``, and the same data. After two
untimed warm-up steps each, the frameworks take turns for ``--rounds`` rounds of
``--timed`` steps (the machine may be shared: alternating spreads its load over
both); the best round of each is kept. Prints one JSON line: steps/s of each, the
ratio asgrad / PyTorch (above 1 asgrad is faster), the first losses of both (they
agree when the weights do) and whether asgrad's step ran compiled whole.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def _asgrad(args: argparse.Namespace, data: dict[str, np.ndarray]) -> tuple[Any, Any]:
    os.environ.setdefault("ASGRAD_CPU_JIT", "1")
    from asgrad import nn
    from asgrad.tensor import Graph

    layer = nn.GRU if args.mode == "gru" else nn.LSTM
    model = layer(args.features, args.hidden, num_layers=args.layers, rng=0)
    g = Graph("lstm step")
    x = g.input("x", data["x"].shape, free=())
    target = g.input("target", data["target"].shape, free=())
    out, _ = model(x)
    loss = ((out - target) * (out - target)).mean()
    step = nn.Adam(model.parameters(), lr=1e-3).compile(loss)

    def run() -> Any:
        return step(data)

    run.function = lambda: step.executable.function(data)  # type: ignore[attr-defined]
    return model, run


def _torch(
    args: argparse.Namespace, data: dict[str, np.ndarray], state: dict[str, np.ndarray]
) -> Callable[[], Any] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    layer = torch.nn.GRU if args.mode == "gru" else torch.nn.LSTM
    model = layer(args.features, args.hidden, num_layers=args.layers)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, target = torch.from_numpy(data["x"]), torch.from_numpy(data["target"])

    def step() -> Any:
        opt.zero_grad()
        out, _ = model(x)
        loss = ((out - target) * (out - target)).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def _rate(step: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        result = step()
    float(result[0] if isinstance(result, list) else result)  # the loss, read
    return n / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--timed", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mode", choices=("lstm", "gru"), default="lstm")
    args = p.parse_args()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(args.threads))
    # numpy only now: OpenBLAS reads its thread count when it loads (imported at the
    # top, numpy's products ran on every core whatever --threads said)
    import numpy as np

    rng = np.random.default_rng(0)
    data = {
        "x": rng.standard_normal((args.steps, args.batch, args.features)).astype(np.float32),
        "target": rng.standard_normal((args.steps, args.batch, args.hidden)).astype(np.float32),
    }
    model, ours = _asgrad(args, data)
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    theirs = _torch(args, data, state)
    start = time.perf_counter()
    first = float(ours()[0])
    first_step_s = time.perf_counter() - start
    ours()
    peers: dict[str, Callable[[], Any]] = {"asgrad": ours}
    result: dict[str, Any] = {"asgrad_first_loss": round(first, 6)}
    if theirs is not None:
        result["torch_first_loss"] = round(float(theirs()), 6)
        theirs()
        peers["torch"] = theirs
    best = dict.fromkeys(peers, 0.0)
    for _ in range(args.rounds):
        for name, step in peers.items():
            best[name] = max(best[name], _rate(step, args.timed))
    from asgrad.tensor.cpu import jit

    fn = ours.function()
    result.update(
        {
            "mode": args.mode,
            "shape": [args.steps, args.batch, args.features, args.hidden, args.layers],
            "asgrad_first_step_s": round(first_step_s, 2),
            "asgrad_steps_per_s": round(best["asgrad"], 1),
            "compiled": jit.mode(),
            "whole_step": bool(fn.whole_step_active()),
            "declined": fn.step_declined,
        }
    )
    if "torch" in best:
        result["torch_steps_per_s"] = round(best["torch"], 1)
        result["ratio"] = round(best["asgrad"] / best["torch"], 2)
    else:
        result["torch"] = "not importable (pip install torch)"
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
