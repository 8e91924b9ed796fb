"""A model PyTorch's exporter wrote, checked without PyTorch (so CI always runs it).

``tests/data/torch_cnn.onnx`` (Conv, ReLU, MaxPool, Flatten, Gemm, Tanh, Gemm) and
``torch_cnn.npz`` (a batch, PyTorch's output on it and PyTorch's gradients of
``sum(y * y)`` for every parameter) were written by ``python tests/test_onnx_torch.py``.
The loaded model must reproduce PyTorch's numbers and train.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asgrad import nn
from asgrad.autograd import grad
from asgrad.onnx import load
from asgrad.tensor import evaluate

DATA = Path(__file__).resolve().parent / "data"


def test_pytorch_written_model_matches_pytorch_values_and_gradients() -> None:
    expected = np.load(DATA / "torch_cnn.npz")
    x = expected["x"]
    loaded = load(DATA / "torch_cnn.onnx", dims={"batch": 2})  # fed 6: the batch is free
    assert [v.name for v in loaded.parameters()] == [
        "0.weight",
        "0.bias",
        "4.weight",
        "4.bias",
        "6.weight",
        "6.bias",
    ]
    g = loaded.graph
    y = loaded.outputs["y"]
    grads = grad((y * y).sum(), [g.bind(v) for v in loaded.parameters()])
    values = evaluate([y, *grads], {"x": x})
    np.testing.assert_allclose(values[0], expected["y"], rtol=1e-4, atol=1e-5)
    for v, got in zip(loaded.parameters(), values[1:], strict=True):
        np.testing.assert_allclose(got, expected[f"grad:{v.name}"], rtol=1e-4, atol=1e-5)


def test_pytorch_written_model_trains() -> None:
    loaded = load(DATA / "torch_cnn.onnx", dims={"batch": 16})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 3, 16)
    g = loaded.graph
    loss = nn.cross_entropy(loaded.outputs["y"], g.input("labels", (16,), "int64"))
    step = nn.SGD(loaded.parameters(), lr=0.1, momentum=0.9).compile(loss)
    losses = [float(step(x=x, labels=labels)[0]) for _ in range(30)]
    assert losses[-1] < 0.25 * losses[0], losses
