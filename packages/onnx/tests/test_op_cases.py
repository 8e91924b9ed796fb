"""Every registry op case that ONNX covers, run by ONNX Runtime and loaded back.

Generated from the op registry, as the GPU parity tests are: for each case of an op
with an exporter, the exported model's ONNX Runtime output matches the op's numpy
kernel within the op's float32 tolerance, and the model loaded back into asgrad
gives asgrad's own output (an op that expands into others is exported as those). An
op without an exporter (a gradient op, a new op) must be refused with
:class:`OnnxExportError` naming it and the line that built it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from asgrad.onnx import DEFAULT_OPSET, EXPORTERS, OnnxExportError, export, load
from asgrad.tensor import Graph, OpCase, OpDef, Tensor, all_ops, evaluate

OPS = all_ops()

# Ops whose ONNX form is newer than the default opset (BitwiseAnd..., ScatterElements
# with max/min): exported at that opset.
OPSET = {
    **dict.fromkeys(("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"), 18),
    "scatter_reduce": 18,
}

# Exported only for some attributes: dropout draws a new mask each run unless p == 0.
EXPORTED_WHEN: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "dropout": lambda attrs: float(attrs.get("p", 0.0)) == 0.0,
    "var": lambda attrs: float(attrs.get("correction", 0.0)) == 0.0,  # population only
    # a scan's packed result, and parts read from a value fed as one, have no ONNX form
    # (the carries and per-step outputs scan() returns do: test_onnx_export_loops.py)
    "scan": lambda attrs: False,
    "scan_part": lambda attrs: False,
    # ONNX's ScatterElements reduces including the value scattered into, and has no mean
    "scatter_reduce": lambda attrs: (
        bool(attrs.get("include_self", True)) and attrs.get("reduce") != "mean"
    ),
}


def _float32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "f" else x


def _attrs32(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("float32" if v == "float64" else v) for k, v in attrs.items()}


def _cases() -> list[Any]:
    params = []
    for op in OPS:
        for i, case in enumerate(op.cases(np.random.default_rng(0)) if op.cases else []):
            params.append(pytest.param(op, case, id=f"{op.name}-{i}-{case.label}".strip("-")))
    return params


def _build(op: OpDef, case: OpCase) -> tuple[Graph, Tensor, dict[str, np.ndarray]]:
    arrays = [_float32(np.asarray(x)) for x in case.inputs]
    g = Graph(f"case-{op.name}")
    feeds = {f"in{i}": a for i, a in enumerate(arrays)}
    tensors = [g.input(name, a.shape, a.dtype.name, free=()) for name, a in feeds.items()]
    return g, g.apply(op.name, tensors, _attrs32(case.attrs)), feeds


def _compare(op: OpDef, got: np.ndarray, want: np.ndarray, what: str) -> None:
    rtol, atol = op.tolerance
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)
    else:
        np.testing.assert_allclose(
            got, want.astype(got.dtype), rtol=max(rtol, 1e-6), atol=max(atol, 1e-6), err_msg=what
        )


@pytest.mark.parametrize(("op", "case"), _cases())
def test_op_case_matches_in_onnx_runtime(op: OpDef, case: OpCase, tmp_path: Path) -> None:
    _, out, feeds = _build(op, case)
    path = tmp_path / "op.onnx"
    # An op that expands into others is exported as the ops it expands into.
    table = op.name in EXPORTERS or not op.primitive
    when = EXPORTED_WHEN.get(op.name)
    exported = table and (when is None or when(case.attrs))
    if not exported:
        with pytest.raises(OnnxExportError, match=op.name) as info:
            export(out, path)
        assert info.value.op == op.name
        assert __file__ in info.value.location  # the line of _build that applied it
        assert not path.exists()
        return
    refused = _export(out, path, OPSET.get(op.name, DEFAULT_OPSET))
    if op.primitive and refused is not None:
        raise refused
    if refused is not None:  # an op it expands into has no exporter: that op is named
        assert refused.op not in EXPORTERS or refused.op in EXPORTED_WHEN, refused
        assert __file__ in refused.location
        assert not path.exists()
        return
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    used = {i.name for i in session.get_inputs()}
    (got,) = session.run(None, {k: v for k, v in feeds.items() if k in used})
    inputs = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in feeds.values()]
    want = np.asarray(op.kernel(*inputs, **_attrs32(case.attrs)))
    _compare(op, np.asarray(got), want, "ONNX Runtime vs the numpy kernel")

    loaded = load(path)
    (back,) = evaluate([loaded.outputs["out"]], {k: feeds[k] for k in loaded.inputs})
    (ours,) = evaluate([out], feeds)
    _compare(op, np.asarray(back), np.asarray(ours), "asgrad -> ONNX -> asgrad")


def _export(out: Tensor, path: Path, opset: int) -> OnnxExportError | None:
    """Export an op that expands into others: the error of an op it expands into that
    has no exporter, or None when all of them export."""
    try:
        export({"out": out}, path, opset=opset)
    except OnnxExportError as exc:
        return exc
    return None
