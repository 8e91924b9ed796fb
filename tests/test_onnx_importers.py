"""Importers that asgrad's own exports never use, proven one ONNX node at a time.

Each case is a one-node (or few-node) ONNX model built with ``onnx.helper``: ONNX
Runtime's output and the output of the model loaded into asgrad must match. The
round trips of ``packages/onnx/tests/test_op_cases.py`` prove the other importers.
docs/onnx.md lists exactly the supported ops.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from asgrad.onnx import IMPORTERS, load
from asgrad.tensor import evaluate

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
X2 = RNG.standard_normal((3, 4)).astype(np.float32)


def _init(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


CASES: dict[str, tuple[list[onnx.NodeProto], list[onnx.TensorProto], np.ndarray, int]] = {
    # name: (nodes reading "x" and writing "y", initializers, x, opset)
    "Gemm transA alpha beta": (
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
        [_init("w", RNG.standard_normal((3, 5))), _init("c", RNG.standard_normal(5))],
        X2,
        17,
    ),
    "GlobalAveragePool": ([helper.make_node("GlobalAveragePool", ["x"], ["y"])], [], X4, 17),
    "GlobalMaxPool": ([helper.make_node("GlobalMaxPool", ["x"], ["y"])], [], X4, 17),
    "Flatten axis 2": ([helper.make_node("Flatten", ["x"], ["y"], axis=2)], [], X4, 17),
    "Gelu tanh (opset 20)": (
        [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
        [],
        X2,
        20,
    ),
    "Gelu (opset 20)": ([helper.make_node("Gelu", ["x"], ["y"])], [], X2, 20),
    "Sum, Max, Min of three": (
        [
            helper.make_node("Sum", ["x", "x", "a"], ["s"]),
            helper.make_node("Max", ["s", "x", "a"], ["m"]),
            helper.make_node("Min", ["m", "a", "s"], ["y"]),
        ],
        [_init("a", RNG.standard_normal(4))],
        X2,
        17,
    ),
    "Dropout (inference)": ([helper.make_node("Dropout", ["x"], ["y"])], [], X2, 17),
    "ReduceMean axes input (opset 18)": (
        [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)],
        [_init("axes", [1, -1], np.int64)],
        X4,
        18,
    ),
    "ReduceSum all, ReduceMin attribute": (
        [
            helper.make_node("ReduceMin", ["x"], ["m"], axes=[0]),
            helper.make_node("ReduceSum", ["m"], ["y"]),
        ],
        [],
        X2,
        17,
    ),
    "ArgMax": ([helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)], [], X2, 17),
    "ConstantOfShape, Range, Add": (
        [
            helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=_init("v", [2.0])),
            helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
            helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["x", "ones"], ["xo"]),
            helper.make_node("Mul", ["xo", "rf"], ["y"]),
        ],
        [
            _init("shape", [3, 4], np.int64),
            _init("start", 0, np.int64),
            _init("limit", 4, np.int64),
            _init("delta", 1, np.int64),
        ],
        X2,
        17,
    ),
    "Softmax before opset 13 (last axis)": (
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
        [],
        X2,
        11,
    ),
    "Transpose default, Expand, Squeeze": (
        [
            helper.make_node("Transpose", ["x"], ["t"]),
            helper.make_node("Unsqueeze", ["t", "ax"], ["u"]),
            helper.make_node("Expand", ["u", "shape"], ["e"]),
            helper.make_node("ReduceSum", ["e", "ax"], ["s"], keepdims=1),
            helper.make_node("Squeeze", ["s", "ax"], ["y"]),
        ],
        [_init("ax", [0], np.int64), _init("shape", [2, 1, 1], np.int64)],
        X2,
        17,
    ),
    "Clip, Elu, LeakyRelu, Softplus, Pow": (
        [
            helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
            helper.make_node("Elu", ["c"], ["e"], alpha=0.7),
            helper.make_node("LeakyRelu", ["e"], ["l"], alpha=0.2),
            helper.make_node("Softplus", ["l"], ["s"]),
            helper.make_node("Pow", ["s", "two"], ["y"]),
        ],
        [_init("lo", -0.5), _init("hi", 0.8), _init("two", 2.0)],
        X2,
        17,
    ),
    "Slice with steps, Gather negative": (
        [
            helper.make_node("Slice", ["x", "st", "en", "axs", "sp"], ["s"]),
            helper.make_node("Gather", ["s", "idx"], ["y"], axis=1),
        ],
        [
            _init("st", [3, 0], np.int64),
            _init("en", [-100, 3], np.int64),
            _init("axs", [1, 0], np.int64),
            _init("sp", [-1, 2], np.int64),
            _init("idx", [-1, 0], np.int64),
        ],
        X2,
        17,
    ),
    "HardSigmoid, HardSwish, Selu, Mish": (
        [
            helper.make_node("HardSigmoid", ["x"], ["a"], alpha=0.3, beta=0.4),
            helper.make_node("HardSwish", ["x"], ["b"]),
            helper.make_node("Selu", ["x"], ["c"]),
            helper.make_node("Mish", ["x"], ["d"]),
            helper.make_node("Mean", ["a", "b", "c", "d"], ["y"]),
        ],
        [],
        X2 * 3,
        18,
    ),
    "PRelu, Reciprocal": (
        [
            helper.make_node("PRelu", ["x", "slope"], ["p"]),
            helper.make_node("Reciprocal", ["p"], ["y"]),
        ],
        [_init("slope", [0.1, 0.2, 0.3, 0.4])],
        X2,
        17,
    ),
    "Split, Tile, Concat": (
        [
            helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], axis=1),
            helper.make_node("Tile", ["s0", "reps"], ["t"]),
            helper.make_node("Split", ["x"], ["h0", "h1"], axis=1, num_outputs=2),
            helper.make_node("Concat", ["t", "s1", "h1", "h0"], ["y"], axis=1),
        ],
        [_init("sizes", [1, 3], np.int64), _init("reps", [1, 2], np.int64)],
        X2,
        18,
    ),
}


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    x: np.ndarray,
    opset: int,
    out_type: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "case",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", *x.shape[1:]])],
        [helper.make_tensor_value_info("y", out_type, None)],
        initializer=inits,
    )
    # The output's shape is left to ONNX Runtime (the checker wants one): no check here.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("name", sorted(CASES))
def test_importer_matches_onnx_runtime(name: str) -> None:
    nodes, inits, x, opset = CASES[name]
    out_type = TensorProto.INT64 if nodes[-1].op_type == "ArgMax" else TensorProto.FLOAT
    model = _model(nodes, inits, x, opset, out_type)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    loaded = load(model, dims={"batch": len(x)})
    (got,) = evaluate([loaded.outputs["y"]], {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_docs_list_exactly_the_supported_onnx_ops() -> None:
    page = (ROOT / "docs/onnx.md").read_text(encoding="utf-8")
    start = page.index("`load` builds these ONNX ops")
    listed = re.findall(r"`([A-Z][A-Za-z0-9]+)`", page[start : page.index("Convolutions", start)])
    assert listed == sorted(IMPORTERS)
