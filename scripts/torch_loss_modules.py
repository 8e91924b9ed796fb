"""Write PyTorch's values and input gradients of its loss modules, in float64, as a fixture.

Run where PyTorch is installed (it is not a dependency of asgrad)::

    python scripts/torch_loss_modules.py     # writes tests/data/torch_parity/loss_modules.npz

Each case is a loss module, its constructor's arguments and its inputs (drawn from a
fixed seed); the file holds the inputs, PyTorch's loss and the gradient of the loss
(summed, for ``reduction="none"``) with respect to every floating input. The asgrad
side (``packages/nn/tests/test_loss_modules.py``) builds the same module from the same
record and compares, without PyTorch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

OUT = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_parity" / "loss_modules.npz"
)


def _cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    """(name, module, kwargs, inputs): inputs are arrays; kwargs may hold arrays."""

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape)

    def labels(n: int, c: int) -> np.ndarray:
        return rng.integers(0, c, n)

    def prob(*shape: int) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-rng.standard_normal(shape)))

    def sign(n: int) -> np.ndarray:
        return np.where(rng.random(n) < 0.5, -1.0, 1.0)

    w3 = np.array([0.5, 2.0, 1.0])
    ignored = labels(6, 3)
    ignored[[1, 4]] = -100
    spatial = rng.integers(0, 3, (2, 4, 5))
    spatial[0, 1, :2] = -100
    logp = np.log(np.exp(f(5, 3)) / np.exp(f(5, 3)).sum(1, keepdims=True))
    cases: list[dict[str, Any]] = []
    for red in ("mean", "sum", "none"):
        cases += [
            {
                "module": "CrossEntropyLoss",
                "kwargs": {"reduction": red},
                "inputs": [f(5, 3), labels(5, 3)],
            },
            {
                "module": "NLLLoss",
                "kwargs": {"reduction": red, "weight": w3},
                "inputs": [logp, labels(5, 3)],
            },
            {"module": "MSELoss", "kwargs": {"reduction": red}, "inputs": [f(4, 3), f(4, 3)]},
            {"module": "L1Loss", "kwargs": {"reduction": red}, "inputs": [f(4, 3), f(4, 3)]},
            {"module": "BCELoss", "kwargs": {"reduction": red}, "inputs": [prob(4, 3), prob(4, 3)]},
            {
                "module": "BCEWithLogitsLoss",
                "kwargs": {"reduction": red},
                "inputs": [f(4, 3), prob(4, 3)],
            },
        ]
    cases += [
        {"module": "CrossEntropyLoss", "kwargs": {}, "inputs": [f(6, 3), ignored]},
        {"module": "CrossEntropyLoss", "kwargs": {"weight": w3}, "inputs": [f(6, 3), ignored]},
        {
            "module": "CrossEntropyLoss",
            "kwargs": {"label_smoothing": 0.2},
            "inputs": [f(6, 3), ignored],
        },
        {
            "module": "CrossEntropyLoss",
            "kwargs": {"weight": w3, "label_smoothing": 0.1, "ignore_index": 2},
            "inputs": [f(6, 3), labels(6, 3)],
        },
        {
            "module": "CrossEntropyLoss",
            "kwargs": {"label_smoothing": 0.1},
            "inputs": [f(2, 3, 4, 5), spatial],
        },
        {"module": "CrossEntropyLoss", "kwargs": {}, "inputs": [f(3), np.array(1)]},
        {
            "module": "CrossEntropyLoss",
            "kwargs": {"label_smoothing": 0.1},
            "inputs": [f(4, 3), np.exp(f(4, 3)) / np.exp(f(4, 3)).sum(1, keepdims=True)],
        },
        {"module": "NLLLoss", "kwargs": {}, "inputs": [logp, np.array([0, -100, 2, 1, -100])]},
        {"module": "SmoothL1Loss", "kwargs": {"beta": 0.5}, "inputs": [f(4, 3), f(4, 3)]},
        {"module": "HuberLoss", "kwargs": {"delta": 0.7}, "inputs": [f(4, 3), f(4, 3)]},
        {
            "module": "BCELoss",
            "kwargs": {"weight": np.array([1.0, 0.5, 2.0])},
            "inputs": [prob(4, 3), prob(4, 3)],
        },
        {
            "module": "BCEWithLogitsLoss",
            "kwargs": {"pos_weight": np.array([1.0, 3.0, 0.5])},
            "inputs": [f(4, 3), prob(4, 3)],
        },
        {"module": "KLDivLoss", "kwargs": {"reduction": "batchmean"}, "inputs": [logp, prob(5, 3)]},
        {
            "module": "KLDivLoss",
            "kwargs": {"reduction": "sum", "log_target": True},
            "inputs": [logp, f(5, 3)],
        },
        {"module": "MarginRankingLoss", "kwargs": {"margin": 0.3}, "inputs": [f(6), f(6), sign(6)]},
        {"module": "HingeEmbeddingLoss", "kwargs": {"margin": 1.5}, "inputs": [f(6), sign(6)]},
        {
            "module": "CosineEmbeddingLoss",
            "kwargs": {"margin": 0.2},
            "inputs": [f(5, 4), f(5, 4), sign(5)],
        },
        {
            "module": "MultiMarginLoss",
            "kwargs": {"p": 2, "margin": 0.8},
            "inputs": [f(5, 3), labels(5, 3)],
        },
        {
            "module": "TripletMarginLoss",
            "kwargs": {"margin": 0.5, "swap": True},
            "inputs": [f(4, 3), f(4, 3), f(4, 3)],
        },
    ]
    return cases


def main() -> int:
    try:
        import torch
    except ImportError:
        print("error: PyTorch does not import here: pip install torch", file=sys.stderr)
        return 2
    rng = np.random.default_rng(20261202)
    arrays: dict[str, np.ndarray] = {}
    records = []
    for i, case in enumerate(_cases(rng)):
        kwargs = {
            k: torch.tensor(v) if isinstance(v, np.ndarray) else v
            for k, v in case["kwargs"].items()
        }
        module = getattr(torch.nn, case["module"])(**kwargs)
        tensors = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in case["inputs"]]
        loss = module(*tensors)
        loss.sum().backward()
        record: dict[str, Any] = {"module": case["module"], "kwargs": {}, "inputs": len(tensors)}
        for k, v in case["kwargs"].items():
            if isinstance(v, np.ndarray):
                arrays[f"{i}.kwarg.{k}"] = v
                record["kwargs"][k] = {"array": f"{i}.kwarg.{k}"}
            else:
                record["kwargs"][k] = v
        for j, (a, t) in enumerate(zip(case["inputs"], tensors, strict=True)):
            arrays[f"{i}.in.{j}"] = a
            if t.grad is not None:
                arrays[f"{i}.grad.{j}"] = t.grad.numpy()
        arrays[f"{i}.out"] = loss.detach().numpy()
        records.append(record)
    arrays["cases"] = np.array(json.dumps(records))
    arrays["torch_version"] = np.array(torch.__version__)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    savez: Any = np.savez_compressed  # keyword arrays, which its stub does not type
    savez(OUT, **arrays)
    print(f"PyTorch {torch.__version__}: {len(records)} cases written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
