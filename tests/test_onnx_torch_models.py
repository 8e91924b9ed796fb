"""Models PyTorch exported, checked without PyTorch: a ``TransformerEncoderLayer``, an
``nn.LSTM`` with a Linear head, and a CNN with ``F.interpolate`` and ``cumsum``.

``tests/data/torch_{transformer,lstm,interpolate}.onnx`` and their ``.npz`` (two
batches of different sizes, PyTorch's outputs, and PyTorch's gradients of
``sum(y * y)`` for the input and every parameter by state-dict name) were written by
``python scripts/make_torch_onnx_fixtures.py`` (PyTorch 2.11: the LSTM and the CNN by
the TorchScript exporter at opset 17, the encoder layer by the dynamo exporter at
opset 18, as the TorchScript exporter no longer traces it). Each loaded model must
give PyTorch's values and gradients, run at another batch size and fine-tune.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.onnx import OnnxModel, load
from asgrad.tensor import evaluate

DATA = Path(__file__).resolve().parent / "data"
MODELS = ["torch_transformer", "torch_lstm", "torch_interpolate"]


@pytest.mark.parametrize("name", MODELS)
def test_pytorch_model_matches_pytorch_values_and_gradients(name: str) -> None:
    expected = np.load(DATA / f"{name}.npz")
    x = expected["x"]
    loaded = load(DATA / f"{name}.onnx", dims={"batch": len(x)})
    g = loaded.graph
    y = loaded.outputs["y"]
    named = [v for v in loaded.parameters() if f"grad:{v.name}" in expected]
    assert named, "no parameter kept its PyTorch name"
    wrt = [loaded.inputs["x"], *(g.bind(v) for v in named)]
    values = evaluate([y, *grad((y * y).sum(), wrt)], {"x": x})
    np.testing.assert_allclose(values[0], expected["y"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values[1], expected["grad:x"], rtol=1e-3, atol=1e-4)
    for v, got in zip(named, values[2:], strict=True):
        np.testing.assert_allclose(got, expected[f"grad:{v.name}"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_pytorch_model_runs_at_another_batch_size(name: str) -> None:
    expected = np.load(DATA / f"{name}.npz")
    x = expected["x_other"]
    assert len(x) != len(expected["x"])
    loaded = load(DATA / f"{name}.onnx", dims={"batch": len(x)})
    (y,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_allclose(y, expected["y_other"], rtol=1e-4, atol=1e-5)


# The encoder layer's reshapes put the batch inside the heads' axis and back; the LSTM's
# initial state is ConstantOfShape(Shape(x)...), zeros that follow the batch fed.
@pytest.mark.parametrize("name", MODELS)
def test_pytorch_model_loaded_at_one_batch_size_runs_at_another(name: str) -> None:
    expected = np.load(DATA / f"{name}.npz")
    loaded = load(DATA / f"{name}.onnx", dims={"batch": len(expected["x"])})
    x = expected["x_other"]
    (y,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_allclose(y, expected["y_other"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_pytorch_lstm_loaded_at_one_batch_size_matches_onnxruntime_at_others(batch: int) -> None:
    # its zero initial state follows the batch fed (a size 1 never broadcast into the
    # declared batch's state), and each example's output is its own
    expected = np.load(DATA / "torch_lstm.npz")
    loaded = load(DATA / "torch_lstm.onnx", dims={"batch": len(expected["x"])})
    x = np.random.default_rng(batch).standard_normal((batch, *expected["x"].shape[1:]))
    x = x.astype(np.float32)
    session = ort.InferenceSession(str(DATA / "torch_lstm.onnx"))
    (want,) = session.run(None, {"x": x})
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (first,) = evaluate([loaded.outputs["y"]], {"x": x[:1]})
    np.testing.assert_allclose(first, got[:1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_pytorch_model_fine_tunes(name: str) -> None:
    expected = np.load(DATA / f"{name}.npz")
    x = expected["x"]
    loaded = load(DATA / f"{name}.onnx", dims={"batch": len(x)})
    _fine_tune(loaded, x)


def test_an_attention_scale_can_be_kept_out_of_training() -> None:
    # the dynamo exporter stores the attention's 1/sqrt(head size) as a 1-element
    # initializer: trainable= leaves it out, every weight still trains
    path = DATA / "torch_transformer.onnx"
    names = [v.name for v in load(path).variables.values()]
    scales = [n for n in names if load(path).variables[n].value.size == 1]
    assert len(scales) == 1
    x = np.load(DATA / "torch_transformer.npz")["x"]
    loaded = load(path, dims={"batch": len(x)}, trainable=[n for n in names if n not in scales])
    assert scales[0] not in [v.name for v in loaded.parameters()]
    before = loaded.variables[scales[0]].value.copy()
    _fine_tune(loaded, x)
    np.testing.assert_array_equal(loaded.variables[scales[0]].value, before)


def _fine_tune(loaded: OnnxModel, x: np.ndarray) -> None:
    g = loaded.graph
    y = loaded.outputs["y"]
    target = g.input("target", y.shape)
    step = nn.Adam(loaded.parameters(), lr=1e-2).compile(nn.mse_loss(y, target))
    goal = np.full(y.shape, 0.5, np.float32)
    losses = [float(step(x=x, target=goal)[0]) for _ in range(25)]
    assert losses[-1] < 0.5 * losses[0], losses
