"""Loss modules against PyTorch's (float64, values and input gradients), from the fixture
``tests/data/torch_parity/loss_modules.npz`` that ``scripts/torch_loss_modules.py`` writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate
from asgrad.tensor.errors import ArgumentError

FIXTURE = (
    Path(__file__).resolve().parents[3] / "tests" / "data" / "torch_parity" / "loss_modules.npz"
)
DATA = np.load(FIXTURE)
CASES: list[dict[str, Any]] = json.loads(str(DATA["cases"]))


def _label(i: int) -> str:
    case = CASES[i]
    return f"{i}-{case['module']}-" + ",".join(f"{k}" for k in case["kwargs"])


@pytest.mark.parametrize("i", range(len(CASES)), ids=_label)
def test_loss_module_matches_pytorch_value_and_gradient(i: int) -> None:
    case = CASES[i]
    kwargs = {k: DATA[v["array"]] if isinstance(v, dict) else v for k, v in case["kwargs"].items()}
    module = getattr(nn, case["module"])(**kwargs)
    arrays = [DATA[f"{i}.in.{j}"] for j in range(case["inputs"])]
    g = Graph()
    inputs = [g.input(f"x{j}", a.shape, str(a.dtype)) for j, a in enumerate(arrays)]
    loss = module(*inputs)
    # the inputs PyTorch differentiated (a float target of sign labels it does not)
    floats = [j for j in range(len(arrays)) if f"{i}.grad.{j}" in DATA.files]
    assert 0 in floats
    grads = grad(loss.sum(), [inputs[j] for j in floats])
    values = evaluate([loss, *grads], {f"x{j}": a for j, a in enumerate(arrays)})
    np.testing.assert_allclose(values[0], DATA[f"{i}.out"], rtol=1e-10, atol=1e-12)
    for j, got in zip(floats, values[1:], strict=True):
        np.testing.assert_allclose(got, DATA[f"{i}.grad.{j}"], rtol=1e-9, atol=1e-12)


def test_cross_entropy_loss_takes_pytorch_defaults() -> None:
    module = nn.CrossEntropyLoss()
    assert (module.ignore_index, module.reduction, module.label_smoothing) == (-100, "mean", 0.0)
    assert module.weight is None


def test_loss_module_refuses_an_unknown_reduction() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ArgumentError, match="reduction"):
        nn.MSELoss(reduction="avg")(x, x)  # type: ignore[arg-type]  # the wrong value under test
