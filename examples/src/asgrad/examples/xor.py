"""XOR: a two-layer perceptron learns exclusive-or.

    python -m asgrad.examples.xor [--steps 1000] [--seed 0] [--device cpu|gpu|auto]
                                  [--plot curve.png] [--log metrics.jsonl]
                                  [--export model.onnx]

Linear 2-8, ReLU, Linear 8-1, sigmoid; MSE; SGD (lr 0.5, momentum 0.9). The whole
training step (forward, backward, update) is one compiled program. Ends with one JSON
line of results. ``--log`` writes each step's loss (``step``, ``loss``) to a .jsonl or
.csv file; ``--plot`` draws the loss curve (needs matplotlib); ``--export`` writes the
trained model as ONNX and checks it in ONNX Runtime (needs asgrad-onnx).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._common import (
    Timer,
    check_plot,
    device,
    open_log,
    parser,
    plot,
    progress,
    report,
)
from asgrad.examples._onnx import check_export, export_onnx
from asgrad.tensor import Graph, evaluate

INPUTS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
TARGETS = np.array([[0], [1], [1], [0]], dtype=np.float32)


def build_model(seed: int) -> nn.Module:
    """Linear 2-8, ReLU, Linear 8-1, sigmoid, drawn from ``seed``."""
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    return model.initialize(seed)


def train(
    steps: int = 1000,
    seed: int = 0,
    backend: str | None = None,
    quiet: bool = True,
    target_loss: float = 1e-3,
    log: nn.MetricWriter | None = None,
    export: str | None = None,
) -> dict[str, Any]:
    """Train until ``steps`` or until the loss is below ``target_loss``; returns results.

    ``log`` receives one record per step: ``step`` (from 1) and ``loss``. ``export``:
    an .onnx path to write the trained model to (checked in ONNX Runtime).
    """
    model = build_model(seed)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    prediction = model(x)
    loss = nn.mse_loss(prediction, y)
    step = nn.SGD(model.parameters(), lr=0.5, momentum=0.9).compile(loss, backend=backend)
    timer = Timer()
    losses: list[float] = []
    for _ in progress(range(steps), total=steps, quiet=quiet, desc="xor"):
        losses.append(float(step(x=INPUTS, y=TARGETS)[0]))
        if log is not None:
            log.write(step=len(losses), loss=losses[-1])
        if losses[-1] < target_loss:
            break
    seconds = timer.seconds
    (pred,) = evaluate([prediction], {"x": INPUTS})
    exported = {} if export is None else export_onnx(export, model, {"x": INPUTS}, "prediction")
    return {
        "final_loss": losses[-1],
        "steps": len(losses),
        "seconds": round(seconds, 4),
        "steps_per_s": round(len(losses) / seconds, 1),
        "predictions": [round(float(p), 4) for p in pred.ravel()],
        "correct": bool(np.all((pred > 0.5) == (TARGETS > 0.5))),
        "device": step.backend,
        "losses": losses,
        **exported,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(
        "Train a two-layer perceptron on XOR.", steps=1000, module="asgrad.examples.xor"
    ).parse_args(argv)
    check_plot(args.plot)
    check_export(args.export)
    with open_log(args.log) as log:
        results = train(
            args.steps, args.seed, device(args.device), args.quiet, log=log, export=args.export
        )
    losses = results.pop("losses")
    if args.plot:
        steps = range(1, len(losses) + 1)
        plot(args.plot, "XOR", [("step", "MSE loss", {"train": (steps, losses)})], log_y=[True])
    report("xor", **results)
    return 0 if results["final_loss"] < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
