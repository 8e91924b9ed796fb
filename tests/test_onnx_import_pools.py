"""The pooling and ConvTranspose forms built from strided slices or cropped, and the
op types read from domains other than ONNX's default one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from asgrad.autograd import grad
from asgrad.onnx import UnsupportedOnnxOpsError, load
from asgrad.tensor import evaluate


def _model(node: onnx.NodeProto, x_shape: list[int], domain: str = "") -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", 19)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets)


def test_max_pool_1d_with_asymmetric_pads_and_ceil_mode_has_values_and_gradient() -> None:
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[0, 1], ceil_mode=1
    )
    x = np.array([[[1.0, 5.0, 2.0, 4.0, 3.0, 6.0]]], dtype=np.float32)
    loaded = load(_model(node, [1, 1, 6]))
    y = loaded.outputs["y"]
    (got,) = evaluate([y], {"x": x})
    # windows [0:3], [2:5], [4:6] (the padded end adds nothing)
    np.testing.assert_array_equal(got, [[[5.0, 4.0, 6.0]]])
    (dx,) = evaluate(grad(y.sum(), [loaded.inputs["x"]]), {"x": x})
    np.testing.assert_array_equal(dx, [[[0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]])


def test_average_pool_3d_counts_only_the_input_without_count_include_pad() -> None:
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2], pads=[1] * 6)
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    (got,) = evaluate([load(_model(node, [1, 1, 2, 2, 2])).outputs["y"]], {"x": x})
    assert got.shape == (1, 1, 3, 3, 3)
    assert got[0, 0, 0, 0, 0] == 0.0  # the one corner entry, not divided by 8
    assert got[0, 0, 1, 1, 1] == pytest.approx(x.mean())


def test_conv_transpose_1d_crops_asymmetric_pads() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 3], [1.0, 2.0, 3.0])
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], pads=[1, 0])
    model = _model(node, [1, 1, 2])
    model.graph.initializer.append(w)
    (got,) = evaluate([load(model).outputs["y"]], {"x": np.array([[[1.0, 10.0]]], np.float32)})
    # unpadded: [1, 12, 23, 30]; one cropped at the start
    np.testing.assert_array_equal(got, [[[12.0, 23.0, 30.0]]])


def test_ml_ops_are_imported_from_their_domain_only() -> None:
    node = helper.make_node("Binarizer", ["x"], ["y"], threshold=0.5)
    plain = _model(node, [3])
    with pytest.raises(UnsupportedOnnxOpsError):
        load(plain)
    node = helper.make_node("Binarizer", ["x"], ["y"], threshold=0.5, domain="ai.onnx.ml")
    (got,) = evaluate(
        [load(_model(node, [3], "ai.onnx.ml")).outputs["y"]],
        {"x": np.array([0.1, 0.5, 0.9], np.float32)},
    )
    np.testing.assert_array_equal(got, [0.0, 0.0, 1.0])
