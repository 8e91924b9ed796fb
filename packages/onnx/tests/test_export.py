"""export: names, dynamic axes, opsets, inputs=, and the errors that name op and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from asgrad.onnx import EXPORTERS, OnnxExportError, export, to_model
from asgrad.tensor import Graph, Tensor, evaluate


def _mlp() -> tuple[Graph, Tensor, Tensor]:
    g = Graph("mlp")
    x = g.input("features", (4, 3))
    w = g.parameter("layer.weight", (3, 2), init=np.arange(6, dtype=np.float32).reshape(3, 2))
    b = g.parameter("layer.bias", (2,), init=np.array([0.5, -0.5], np.float32))
    return g, x, ((x @ w) + b).tanh()


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def test_names_initializers_and_dynamic_batch(tmp_path: Path) -> None:
    _, _x, y = _mlp()
    model = export({"scores": y}, tmp_path / "m.onnx")
    assert [i.name for i in model.graph.input] == ["features"]
    assert [i.name for i in model.graph.initializer] == ["layer.weight", "layer.bias"]
    assert [o.name for o in model.graph.output] == ["scores"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert (dims[0].dim_param, dims[1].dim_value) == ("batch", 3)
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert any(__file__ in n.doc_string for n in model.graph.node)  # the building line
    feed = np.random.default_rng(0).standard_normal((9, 3)).astype(np.float32)
    (got,) = _run(tmp_path / "m.onnx", {"features": feed})
    np.testing.assert_allclose(got, evaluate(y, {"features": feed})[0], rtol=1e-6, atol=1e-6)


def test_fixed_axes_stay_fixed_and_several_outputs_are_numbered(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", (2, 5), free=())
    model = export([x.sum(axis=1), x.max(axis=0)], tmp_path / "m.onnx")
    assert [o.name for o in model.graph.output] == ["output", "output_1"]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 5]


def test_inputs_order_and_a_parameter_as_input(tmp_path: Path) -> None:
    g = Graph()
    a, b = g.input("a", (2,)), g.input("b", (2,))
    w = g.parameter("w", (2,), init=np.ones(2, np.float32))
    model = export(a * w - b, tmp_path / "m.onnx", inputs=["b", a, "w"])
    assert [i.name for i in model.graph.input] == ["b", "a", "w"]
    assert not model.graph.initializer
    (got,) = _run(
        tmp_path / "m.onnx",
        {
            "a": np.full(2, 3, np.float32),
            "b": np.ones(2, np.float32),
            "w": np.full(2, 2, np.float32),
        },
    )
    np.testing.assert_array_equal(got, [5.0, 5.0])


def test_inputs_that_leave_out_a_needed_input_are_refused(tmp_path: Path) -> None:
    g = Graph()
    a, b = g.input("a", (2,)), g.input("b", (2,))
    with pytest.raises(OnnxExportError, match=r"\['b'\].*inputs= leaves out"):
        export(a + b, tmp_path / "m.onnx", inputs=[a])
    with pytest.raises(OnnxExportError, match="'c', which the outputs do not read"):
        export(a + b, tmp_path / "m.onnx", inputs=[a, b, "c"])


@pytest.mark.parametrize("opset", [17, 18, 21])
def test_reductions_at_each_opset(opset: int, tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", (3, 4, 5))
    outs = {"mean": x.mean(axis=(0, 2)), "max": x.max(axis=1, keepdims=True), "var": x.var(axis=2)}
    model = export(outs, tmp_path / "m.onnx", opset=opset)
    assert model.opset_import[0].version == opset
    feed = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    got = _run(tmp_path / "m.onnx", {"x": feed})
    for value, want in zip(got, evaluate(list(outs.values()), {"x": feed}), strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)


def test_a_float16_value_is_refused_with_the_fix() -> None:
    x = Graph().input("x", (2,), "float16")
    with pytest.raises(OnnxExportError, match=r"float16 have no ONNX mapping.*cast them"):
        to_model(x * 2.0)


@pytest.mark.parametrize("opset", [16, 99, True])
def test_an_unsupported_opset_is_refused(opset: int) -> None:
    _, _, y = _mlp()
    with pytest.raises(OnnxExportError, match=r"opset .* is not supported; give an int from 17"):
        to_model(y, opset=opset)


def test_a_gradient_op_names_itself_and_the_line(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    grad_of_slice = g.apply(
        "scatter_slice", [g.input("g", (2, 5), free=()), x], {"index": (slice(1, 3),)}
    )
    line = f"{__file__}:{grad_of_slice.node.location.rsplit(':', 1)[1]}"
    with pytest.raises(OnnxExportError) as info:
        export(grad_of_slice, tmp_path / "m.onnx")
    assert info.value.op == "scatter_slice"
    assert info.value.location == line
    assert "'scatter_slice' cannot be exported" in str(info.value)
    assert "a gradient op" in str(info.value)
    assert line in str(info.value)
    assert not (tmp_path / "m.onnx").exists()


def test_an_op_without_an_exporter_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(EXPORTERS, "tanh")  # as a newly registered op would be
    _, _, y = _mlp()
    with pytest.raises(OnnxExportError, match=r"'tanh'.*has no exporter for it yet") as info:
        export(y, tmp_path / "m.onnx")
    assert info.value.location.startswith(__file__)


def test_training_dropout_is_refused_with_the_fix(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    seed = g.constant(np.array(3, np.int64))
    with pytest.raises(OnnxExportError, match=r"model\.eval\(\)"):
        export(g.apply("dropout", [x, seed], {"p": 0.5}), tmp_path / "m.onnx")


def test_bad_outputs_are_refused() -> None:
    with pytest.raises(OnnxExportError, match="at least one output"):
        to_model([])
    _, _, y = _mlp()
    other = Graph().input("z", (1,))
    with pytest.raises(OnnxExportError, match="one graph"):
        to_model([y, other])
    with pytest.raises(OnnxExportError, match="not an asgrad Tensor"):
        to_model({"y": np.zeros(2)})  # type: ignore[dict-item]  # the wrong type on purpose


def test_every_written_file_passes_the_checker(tmp_path: Path) -> None:
    _, _, y = _mlp()
    export(y, tmp_path / "m.onnx")
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)


def test_an_attribute_the_exporter_does_not_know_is_refused(tmp_path: Path) -> None:
    g = Graph()
    out = g.apply("max_pool2d", [g.input("x", (1, 1, 4, 4))], {"kernel_size": 2})
    out.node.attrs["ceil_mode"] = True  # as if the op had grown an option
    with pytest.raises(OnnxExportError, match=r"\['ceil_mode'\] that its ONNX exporter"):
        export(out, tmp_path / "m.onnx")
