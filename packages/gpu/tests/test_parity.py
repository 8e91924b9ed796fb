"""Parity generated from the op registry: every op on the GPU against its numpy kernel.

A new op fails here until it has a WGSL twin (``asgrad.gpu.lowering``) and parity
cases; values are compared within the op's own float32 tolerance, and in float16 (the
first cases of each op with float inputs) against the numpy kernel on the same float16
values, within two float16 steps. Gradients computed
on the GPU are compared with the CPU's in the root ``tests/test_gpu_gradients.py``
(they need ``asgrad.autograd``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, GpuUnsupportedError, to_gpu
from asgrad.gpu.lowering import LEAVES, gpu_kernel_names, lower
from asgrad.tensor import Graph, OpCase, OpDef, TensorType, all_ops, evaluate

OPS = all_ops()


def _float32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "f" else x


def _cases() -> list[Any]:
    params = []
    for op in OPS:
        if op.cases is None:
            continue
        for i, case in enumerate(op.cases(np.random.default_rng(0))):
            params.append(pytest.param(op, case, id=f"{op.name}-{i}-{case.label}".strip("-")))
    return params


def test_every_registered_op_has_a_gpu_kernel() -> None:
    # An op that expands into others runs as its expansion (see _run below).
    missing = [op.name for op in OPS if op.primitive and op.name not in gpu_kernel_names()]
    assert not missing, f"ops without a GPU kernel (add them to asgrad.gpu.lowering): {missing}"


def test_every_computing_op_has_parity_cases() -> None:
    missing = [op.name for op in OPS if op.cases is None and op.name not in LEAVES]
    assert not missing, f"ops without test cases (give their OpDef cases=...): {missing}"


def _attrs32(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("float32" if v == "float64" else v) for k, v in attrs.items()}


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "case"), _cases())
def test_op_matches_numpy_kernel(device: Device, op: OpDef, case: OpCase) -> None:
    inputs = [_float32(np.asarray(x)) for x in case.inputs]
    attrs = op.normalize_attrs(_attrs32(case.attrs))  # a node holds every attribute
    types = [TensorType(x.shape, x.dtype.name) for x in inputs]
    out_type = op.infer(types, attrs)
    # the reference: the numpy kernel on the same float32 values, computed in float64
    want = np.asarray(
        op.kernel(*[x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs], **attrs)
    )
    try:
        got = _run(device, op, inputs, attrs, out_type)
    except GpuUnsupportedError as exc:  # an int64 beyond int32: not storable on the GPU
        pytest.skip(str(exc))
    assert got.shape == tuple(out_type.shape)
    rtol, atol = op.tolerance
    if want.dtype.kind in "biu" or out_type.dtype in ("bool", "int32", "int64"):
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    else:
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=max(rtol, 1e-6), atol=atol)


def _float16_cases() -> list[Any]:
    params = []
    for op in OPS:
        if op.cases is None:
            continue
        cases = op.cases(np.random.default_rng(0))
        floats = [
            (i, c)
            for i, c in enumerate(cases)
            if any(np.asarray(x).dtype.kind == "f" for x in c.inputs)
        ]
        for i, case in floats[:F16_CASES_PER_OP]:
            params.append(pytest.param(op, case, id=f"{op.name}-{i}-{case.label}".strip("-")))
    return params


# The first case of each op with float inputs runs in float16 too: one keeps the suite
# quick (the float32 test runs them all) while reaching every float16 kernel.
F16_CASES_PER_OP = 1
# Two float16 steps (a float16 has 11 significant bits): the GPU widens to f32 for
# everything but + - *, as numpy's float16 loops do, and f32 sums may round apart
# from numpy's order of additions by a step.
F16_RTOL = 2e-3


def _half(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        return x
    with np.errstate(over="ignore"):  # beyond 65504: inf, as the GPU must handle too
        return x.astype(np.float16)


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "case"), _float16_cases())
def test_op_matches_numpy_kernel_in_float16(device: Device, op: OpDef, case: OpCase) -> None:
    inputs = [_half(np.asarray(x)) for x in case.inputs]
    attrs = op.normalize_attrs(
        {k: ("float16" if v in ("float32", "float64") else v) for k, v in case.attrs.items()}
    )
    out_type = op.infer([TensorType(x.shape, x.dtype.name) for x in inputs], attrs)
    with np.errstate(all="ignore"):  # the reference: numpy's float16 meaning
        # an op that expands means its expansion, each op rounded to float16
        want = np.asarray(
            op.kernel(*inputs, **attrs) if op.primitive else _expanded(op, inputs, attrs, "cpu")
        )
    try:
        got = _run(device, op, inputs, attrs, out_type)
    except GpuUnsupportedError as exc:  # an int64 beyond int32: not storable on the GPU
        pytest.skip(str(exc))
    assert got.shape == tuple(out_type.shape)
    if out_type.dtype != "float16":
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        return
    assert got.dtype == want.dtype == np.float16
    atol = max(op.tolerance[1], 1e-4)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), F16_RTOL, atol)


def _run(
    device: Device, op: OpDef, inputs: list[np.ndarray], attrs: dict[str, Any], out: TensorType
) -> np.ndarray:
    """The op's value on the GPU: its lowering, or for an op that expands into others,
    a graph of its expansion run by the GPU backend."""
    if op.primitive:
        arrays = [to_gpu(x, device) for x in inputs]
        return lower(op.name, arrays, attrs, out).numpy()
    return _expanded(op, inputs, attrs, "gpu")


def _expanded(
    op: OpDef, inputs: list[np.ndarray], attrs: dict[str, Any], backend: str
) -> np.ndarray:
    """A graph of the op (which expands into others) run by ``backend``."""
    g = Graph()
    xs = [g.input(f"x{i}", x.shape, x.dtype.name, free=()) for i, x in enumerate(inputs)]
    (got,) = evaluate(
        [g.apply(op.name, xs, attrs)],
        dict(zip([x.name for x in xs], inputs, strict=True)),
        backend=backend,
    )
    return np.asarray(got)
