"""The composed math importers: accurate over the whole range, exact on integers, and
refused where they could not be exact."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from asgrad.onnx import OnnxImportError, load
from asgrad.tensor import evaluate


def _unary(op: str, dtype: int, n: int) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("x", dtype, [n])],
        [helper.make_tensor_value_info("y", dtype, [n])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("op", "fn", "values"),
    [
        ("Asinh", np.arcsinh, [-1e5, -2e4, -3.0, -1e-3, 0.0, 1e-3, 2.0, 5e4]),
        ("Acosh", np.arccosh, [1.0, 1.5, 10.0, 2e4, 1e30]),
        ("Atanh", np.arctanh, [-0.9, -1e-3, 0.0, 1e-4, 0.5, 0.999]),
        ("Sinh", np.sinh, [-5.0, -1e-5, 0.0, 1e-5, 0.009, 0.02, 3.0]),
        ("Cosh", np.cosh, [-3.0, 0.0, 2.0]),
    ],
)
def test_hyperbolic_functions_keep_float32_accuracy_at_both_ends(
    op: str, fn: Callable[[np.ndarray], np.ndarray], values: list[float]
) -> None:
    x = np.array(values, np.float32)
    model = load(_unary(op, TensorProto.FLOAT, len(x)))
    (got,) = evaluate([model.outputs["y"]], {"x": x})
    np.testing.assert_allclose(got, fn(x.astype(np.float64)), rtol=1e-6, atol=0)


def test_integer_div_truncates_and_mod_follows_the_sign_rules() -> None:
    a = np.array([7, -7, 7, -7, 6, -6], np.int64)
    b = np.array([2, 2, -2, -2, 3, 4], np.int64)
    graph = helper.make_graph(
        [
            helper.make_node("Div", ["a", "b"], ["q"]),
            helper.make_node("Mod", ["a", "b"], ["r"]),
            helper.make_node("Mod", ["a", "b"], ["f"], fmod=1),
        ],
        "int",
        [helper.make_tensor_value_info(n, TensorProto.INT64, [6]) for n in "ab"],
        [helper.make_tensor_value_info(n, TensorProto.INT64, [6]) for n in "qrf"],
    )
    model = load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    q, r, f = evaluate([model.outputs[n] for n in "qrf"], {"a": a, "b": b})
    np.testing.assert_array_equal(q, np.trunc(a / b).astype(np.int64))
    np.testing.assert_array_equal(r, np.remainder(a, b))
    np.testing.assert_array_equal(f, np.fmod(a, b))


def test_mod_on_floats_is_refused_rather_than_approximated() -> None:
    graph = helper.make_graph(
        [helper.make_node("Mod", ["a", "b"], ["y"], name="wrap", fmod=1)],
        "fmod",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(OnnxImportError, match="exact fmod") as info:
        load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert (info.value.op_type, info.value.node) == ("Mod", "wrap")
