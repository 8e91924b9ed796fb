"""Exporting loops and the newer primitives: ONNX Runtime runs them at other sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from asgrad import nn
from asgrad.onnx import OnnxExportError, export, load
from asgrad.tensor import Graph, Tensor, evaluate, scan


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, feeds)]


def test_an_lstm_exports_as_scan_and_runs_at_other_batch_and_sequence_lengths(
    tmp_path: Path,
) -> None:
    lstm = nn.LSTM(3, 5, batch_first=True)
    lstm.initialize(0)
    lstm.eval()
    g = Graph("lstm")
    x = g.input("x", (2, 4, 3), free=(0, 1))
    out = lstm(x)
    y = out[0] if isinstance(out, tuple) else out
    path = tmp_path / "lstm.onnx"
    model = export({"y": y}, path)
    assert "Scan" in {n.op_type for n in model.graph.node}
    rng = np.random.default_rng(0)
    for batch, steps in ((2, 4), (3, 7), (1, 1)):
        feed = rng.standard_normal((batch, steps, 3)).astype(np.float32)
        (got,) = _run(path, {"x": feed})
        (want,) = evaluate([y], {"x": feed})
        assert got.shape == (batch, steps, 5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    loaded = load(path, dims={"batch": 3, "x_dim1": 7})
    feed = rng.standard_normal((3, 7, 3)).astype(np.float32)
    (back,) = evaluate([loaded.outputs["y"]], {"x": feed})
    np.testing.assert_allclose(back, _run(path, {"x": feed})[0], rtol=1e-5, atol=1e-6)


def test_a_reverse_scan_with_a_captured_weight_and_two_outputs_exports(tmp_path: Path) -> None:
    g = Graph("cumulative")
    xs = g.input("xs", (6, 2), free=(0,))
    w = g.parameter("w", (2, 2), init=np.array([[0.5, -1.0], [0.25, 2.0]], np.float32))

    def step(carry: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        new = (carry @ w).tanh() + x
        return new, new * 2.0

    init = g.constant(np.zeros(2, np.float32))
    last, ys = scan(step, init, xs, reverse=True)
    path = tmp_path / "scan.onnx"
    export({"last": last, "ys": ys}, path)
    feed = np.random.default_rng(1).standard_normal((9, 2)).astype(np.float32)
    got = _run(path, {"xs": feed})
    want = evaluate([last, ys], {"xs": feed})
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_scan_without_scanned_inputs_is_refused_by_name(tmp_path: Path) -> None:
    g = Graph("counter")
    x = g.input("x", (3,))
    last, _ = scan(lambda c, _: (c * 2.0, None), x, None, length=4)
    with pytest.raises(OnnxExportError, match="scan") as info:
        export({"y": last}, tmp_path / "no.onnx")
    assert info.value.op == "scan"


def test_sorting_and_cumulative_ops_run_at_another_batch_size(tmp_path: Path) -> None:
    g = Graph("ranks")
    x = g.input("x", (2, 5))
    values, indices = x.topk(3)
    total = x.cumsum(1, reverse=True)
    picked = x.take_along_axis(x.argsort(1), 1)
    scattered = x.scatter_reduce(1, indices, values * 0.0 + 1.0, "sum")
    masked = ~(x > 0.0)
    outs = {
        "values": values,
        "indices": indices,
        "total": total,
        "picked": picked,
        "scattered": scattered,
        "masked": masked,
    }
    path = tmp_path / "ranks.onnx"
    export(outs, path)
    feed = np.random.default_rng(2).standard_normal((7, 5)).astype(np.float32)
    got = _run(path, {"x": feed})
    want = evaluate(list(outs.values()), {"x": feed})
    for name, a, b in zip(outs, got, want, strict=True):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=name)
