"""load(constants=, trainable=): inputs known at load time, and which initializers train."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from asgrad.onnx import OnnxConstantRequiredError, OnnxImportError, load
from asgrad.tensor import evaluate


def _reshape_model() -> onnx.ModelProto:
    """y = reshape(x, shape) @ w * scale, with ``shape`` a graph input."""
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "shape"], ["flat"], name="flatten"),
            helper.make_node("MatMul", ["flat", "w"], ["p"]),
            helper.make_node("Mul", ["p", "scale"], ["y"]),
        ],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        initializer=[
            numpy_helper.from_array(np.ones((12, 2), np.float32), "w"),
            numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_input_needed_at_load_time_is_named_and_taken_from_constants() -> None:
    model = _reshape_model()
    with pytest.raises(OnnxConstantRequiredError) as info:
        load(model)
    assert info.value.inputs == ("shape",)
    assert info.value.op_type == "Reshape"
    assert info.value.node == "flatten"
    assert "constants={'shape': ...}" in str(info.value)
    loaded = load(model, constants={"shape": np.array([2, 12])})
    assert [s.name for s in loaded.input_specs] == ["x"]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_allclose(got, x.reshape(2, 12) @ np.ones((12, 2)) * 0.5, rtol=1e-6)


def test_constants_for_a_name_that_is_not_an_input_is_an_error() -> None:
    with pytest.raises(OnnxImportError, match="not inputs of the model"):
        load(_reshape_model(), constants={"shape": [2, 12], "other": [1]})


def test_trainable_chooses_which_initializers_train() -> None:
    model = _reshape_model()
    shape = {"shape": np.array([2, 12])}
    assert [v.name for v in load(model, constants=shape).parameters()] == ["w", "scale"]
    assert load(model, constants=shape, trainable=False).parameters() == []
    frozen = load(model, constants=shape, trainable=["w"])
    assert [v.name for v in frozen.parameters()] == ["w"]
    assert not frozen.variables["scale"].trainable
    assert [v.name for v in load(model, constants=shape, trainable="w").parameters()] == ["w"]
    with pytest.raises(OnnxImportError, match="not initializers"):
        load(model, constants=shape, trainable=["nope"])


def test_a_value_computed_from_initializers_only_is_folded_at_load_time() -> None:
    # Reshape's target is computed (Add of two initializers), not given: folded, not refused
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["half", "half"], ["target"]),
            helper.make_node("Reshape", ["x", "target"], ["y"]),
        ],
        "folded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
        initializer=[numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "half")],
    )
    cast = helper.make_node("Cast", ["target"], ["target_i"], to=TensorProto.INT64)
    graph.node.insert(1, cast)
    graph.node[2].input[1] = "target_i"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    loaded = load(model)
    assert loaded.outputs["y"].shape == (4, 3)
