"""The example models through ONNX: ONNX Runtime agrees, and a round trip keeps gradients.

Each example model (XOR's perceptron, the CNN, the character transformer) is traced
in eval mode with a declared batch, exported, and run by ONNX Runtime on a batch of
another size (the batch axis stays dynamic); the outputs match asgrad's. Loaded
back, the model gives the same outputs and the same gradients with respect to every
parameter as the original graph; and it trains on the CPU and the GPU.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.examples import cnn, lstm, transformer, xor
from asgrad.onnx import export, load
from asgrad.tensor import Graph, Tensor, evaluate

RTOL, ATOL = 1e-4, 1e-5


def _xor() -> tuple[nn.Module, np.ndarray]:
    return xor.build_model(0), np.random.default_rng(1).random((7, 2)).astype(np.float32)


def _cnn() -> tuple[nn.Module, np.ndarray]:
    images = np.random.default_rng(2).random((5, 1, 8, 8)).astype(np.float32)
    return cnn.build_model((8, 8), seed=0), images


def _transformer() -> tuple[nn.Module, np.ndarray]:
    model = transformer.CharTransformer(20, dim=16, num_heads=2, num_layers=2, context=12)
    return model, np.random.default_rng(3).integers(0, 20, (5, 12))


MODELS: dict[str, Callable[[], tuple[nn.Module, np.ndarray]]] = {
    "xor": _xor,
    "cnn": _cnn,
    "transformer": _transformer,
}


def _trace(model: nn.Module, sample: np.ndarray, batch: int = 3) -> tuple[Graph, Tensor]:
    model.eval()
    g = Graph("traced")
    x = g.input("x", (batch, *sample.shape[1:]), sample.dtype.name)
    return g, model(x)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_example_model_matches_in_onnx_runtime(name: str, tmp_path: Path) -> None:
    model, sample = MODELS[name]()
    _, out = _trace(model, sample)  # declared batch 3; run at batch 5 or 7
    path = tmp_path / f"{name}.onnx"
    export({"y": out}, path)
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path))
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert {i.name for i in proto.graph.initializer} == {p.name for p in out.graph.parameters}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(["y"], {"x": sample})
    (ours,) = evaluate([out], {"x": sample})
    assert theirs.shape == ours.shape == (len(sample), *out.shape[1:])
    np.testing.assert_allclose(theirs, ours, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_keeps_outputs_and_gradients(name: str, tmp_path: Path) -> None:
    model, sample = MODELS[name]()
    g, out = _trace(model, sample, batch=len(sample))
    path = tmp_path / f"{name}.onnx"
    export({"y": out}, path)
    loaded = load(path, dims={"batch": len(sample)})
    back = loaded.outputs["y"]

    weights = np.random.default_rng(4).standard_normal(out.shape).astype(np.float32)
    params = g.parameters
    grads = grad((out * g.constant(weights)).sum(), [g[p.name] for p in params])
    lg = loaded.graph
    loaded_grads = grad(
        (back * lg.constant(weights)).sum(), [lg.bind(loaded.variables[p.name]) for p in params]
    )
    ours = evaluate([out, *grads], {"x": sample})
    theirs = evaluate([back, *loaded_grads], {"x": sample})
    assert len(ours) == len(theirs) == len(params) + 1
    for p, a, b in zip(["output", *(p.name for p in params)], ours, theirs, strict=True):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=p)


def test_loaded_model_fine_tunes(tmp_path: Path) -> None:
    model, sample = _cnn()
    _, out = _trace(model, sample)
    path = tmp_path / "cnn.onnx"
    export({"logits": out}, path)
    loaded = load(path, dims={"batch": 8})
    rng = np.random.default_rng(5)
    images = rng.random((8, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, 8)
    y = loaded.graph.input("labels", (8,), "int64")
    loss = nn.cross_entropy(loaded.outputs["logits"], y)
    step = nn.Adam(loaded.parameters(), lr=1e-2).compile(loss)
    losses = [float(step(x=images, labels=labels)[0]) for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]
    assert len(loaded.parameters()) == 6  # two convs and the linear: weight and bias


def test_xor_cli_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "xor.onnx"
    assert xor.main(["--quiet", "--export", str(path)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["onnx"] == str(path)
    assert line["onnx_max_abs_diff"] < 1e-5
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    (pred,) = session.run(None, {"x": inputs})
    assert ((pred.ravel() > 0.5) == np.array([False, True, True, False])).all()


def test_lstm_cli_exports_its_scans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lstm.onnx"
    argv = ["--quiet", "--steps", "2", "--hidden", "16", "--batch-size", "4"]
    assert lstm.main([*argv, "--export", str(path)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["onnx"] == str(path)
    assert line["onnx_max_abs_diff"] < 1e-5
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    window = session.get_inputs()[0].shape[1]
    ids = np.zeros((3, window), np.int64)  # another batch size than exported (8)
    (logits,) = session.run(None, {"ids": ids})
    assert logits.shape == (3, window, line["vocab"])


def test_export_flag_without_asgrad_onnx_stops_before_training(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "asgrad.onnx", None)  # import fails as if not installed
    with pytest.raises(SystemExit, match=r"--export needs asgrad-onnx.*asgrad-examples\[onnx\]"):
        xor.main(["--quiet", "--export", str(tmp_path / "x.onnx")])
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.gpu
def test_loaded_model_runs_and_differentiates_on_the_gpu(device: object, tmp_path: Path) -> None:
    model, sample = _cnn()
    _, out = _trace(model, sample, batch=len(sample))
    path = tmp_path / "cnn.onnx"
    export({"y": out}, path)
    loaded = load(path, dims={"batch": len(sample)})
    lg = loaded.graph
    y = loaded.outputs["y"]
    params = [lg.bind(v) for v in loaded.parameters()]
    grads = grad((y * y).sum(), params)
    cpu = evaluate([y, *grads], {"x": sample}, backend="cpu")
    gpu = evaluate([y, *grads], {"x": sample}, backend="gpu")
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4)
