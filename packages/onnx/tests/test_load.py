"""load: variables from initializers, free axes, folded shape arithmetic, and the errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from asgrad.onnx import OnnxImportError, UnsupportedOnnxOpsError, export, load
from asgrad.tensor import Graph, evaluate


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[np.ndarray],
    names: list[str],
    x_shape: list[int | str],
    out_rank: int,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "handmade",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)],
        initializer=[numpy_helper.from_array(a, n) for a, n in zip(inits, names, strict=True)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def test_shape_arithmetic_is_folded_and_the_batch_stays_free(tmp_path: Path) -> None:
    # y = reshape(x, [shape(x)[0], -1]) @ w: the form PyTorch's exporter gives flatten
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    w = np.random.default_rng(0).standard_normal((12, 2)).astype(np.float32)
    inits = [np.array(0, np.int64), np.array([0], np.int64), np.array([-1], np.int64), w]
    model = _model(nodes, inits, ["zero", "axes", "minus_one", "w"], ["batch", 3, 4], 2)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    loaded = load(path)
    assert loaded.inputs["x"].shape == (1, 3, 4)
    assert loaded.inputs["x"].node.attrs["free"] == (0,)
    assert list(loaded.variables) == ["w"]
    assert loaded.parameters()[0].trainable
    x = np.random.default_rng(1).standard_normal((5, 3, 4)).astype(np.float32)
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_unsupported_ops_are_listed_at_once_by_name_and_count() -> None:
    nodes = [
        helper.make_node("Acos", ["x"], ["a"]),
        helper.make_node("Acos", ["a"], ["b"]),
        helper.make_node("Relu", ["b"], ["c"]),
        helper.make_node("Det", ["c"], ["d"]),
        helper.make_node("Fancy", ["d"], ["y"], domain="com.example"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)],
    )
    with pytest.raises(UnsupportedOnnxOpsError) as info:
        load(model)
    assert info.value.ops == {"Acos": 2, "Det": 1, "com.example:Fancy": 1}
    assert info.value.nodes["Acos"] == "Acos"
    assert info.value.op_type == "Acos"
    assert "Acos x2" in str(info.value)
    assert "3 ONNX op type(s)" in str(info.value)


def test_a_file_that_is_not_onnx_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a model")
    with pytest.raises(OnnxImportError, match="cannot read ONNX model"):
        load(bad)
    with pytest.raises(OnnxImportError, match="cannot read ONNX model"):
        load(tmp_path / "missing.onnx")


def test_a_loaded_model_traces_into_another_graph_with_the_same_variables(
    tmp_path: Path,
) -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    w = g.parameter("w", (3, 3), init=np.eye(3, dtype=np.float32) * 2)
    export({"y": (x @ w).relu()}, tmp_path / "m.onnx")
    loaded = load(tmp_path / "m.onnx", dims={"batch": 4})
    assert loaded.inputs["x"].shape == (4, 3)
    other = Graph("serve")
    out = loaded(x=other.input("x", (2, 3)))["y"]
    assert other.variables() == [loaded.variables["w"]]
    loaded.variables["w"].value = np.eye(3, dtype=np.float32) * 3  # one variable, both graphs
    feed = np.array([[1, -1, 2], [0, 1, 0]], np.float32)
    for t in (out, loaded.outputs["y"]):
        np.testing.assert_array_equal(evaluate(t, {"x": feed})[0], np.maximum(feed * 3, 0))
    with pytest.raises(OnnxImportError, match=r"inputs are \['x'\]"):
        loaded(z=other.input("z", (2, 3)))


def test_batch_norm_statistics_are_loaded_untrained() -> None:
    c = 3
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])]
    rng = np.random.default_rng(2)
    stats = [rng.random(c).astype(np.float32) + 0.5 for _ in range(4)]
    model = _model(nodes, stats, ["s", "b", "m", "v"], ["batch", c, 2, 2], 4)
    loaded = load(model)
    assert [v.name for v in loaded.parameters()] == ["s", "b"]
    assert not loaded.variables["m"].trainable
    assert not loaded.variables["v"].trainable
    x = rng.standard_normal((2, c, 2, 2)).astype(np.float32)
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    s, b, m, v = (a.reshape(1, c, 1, 1) for a in stats)
    np.testing.assert_allclose(got, (x - m) / np.sqrt(v + 1e-5) * s + b, rtol=1e-5, atol=1e-6)


def test_asymmetric_padding_is_refused_with_the_reason() -> None:
    w = np.ones((1, 1, 3, 3), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 0, 0])]
    with pytest.raises(OnnxImportError, match="not symmetric"):
        load(_model(nodes, [w], ["w"], ["batch", 1, 5, 5], 4))


def test_a_reshape_that_copies_the_batch_axis_keeps_it_free() -> None:
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"])]
    model = _model(nodes, [np.array([0, -1], np.int64)], ["target"], ["batch", 3, 4], 2)
    loaded = load(model)
    x = np.arange(5 * 12, dtype=np.float32).reshape(5, 3, 4)
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_array_equal(got, x.reshape(5, 12))


def _plus(init: onnx.TensorProto) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", init.name], ["y"])],
        "handmade",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[init],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_external_data_outside_the_model_folder_is_an_import_error_naming_it() -> None:
    init = numpy_helper.from_array(np.ones(2, np.float32), "w")
    init.ClearField("raw_data")
    init.data_location = TensorProto.EXTERNAL
    init.external_data.add(key="location", value="../../etc/passwd")
    with pytest.raises(OnnxImportError, match="initializer 'w'"):
        load(_plus(init))


def test_an_initializer_whose_dims_claim_more_than_its_data_is_an_import_error() -> None:
    init = numpy_helper.from_array(np.ones(2, np.float32), "w")
    init.dims[:] = [2, 1000]
    with pytest.raises(OnnxImportError, match=r"initializer 'w' \(dims \[2, 1000\]\)"):
        load(_plus(init))


def test_a_reshape_with_the_batch_not_in_front_runs_at_any_batch() -> None:
    # (L, batch, E) -> (L, batch * heads, E / heads), as attention's head split, with the
    # target folded at the declared batch (2): the batch stays free inside axis 1.
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"])]
    target = np.array([5, 2 * 4, 2], np.int64)
    model = _model(nodes, [target], ["target"], [5, "batch", 8], 3)
    loaded = load(model, dims={"batch": 2})
    for batch in (1, 3):
        x = np.arange(5 * batch * 8, dtype=np.float32).reshape(5, batch, 8)
        (got,) = evaluate([loaded.outputs["y"]], {"x": x})
        assert got.shape == (5, batch * 4, 2)
        np.testing.assert_array_equal(got, x.reshape(5, batch * 4, 2))
