"""Gradients computed on the GPU match the same gradient graph on the CPU, for every op.

Generated from the op registry like ``packages/gpu/tests/test_parity.py``; it lives here
because it needs ``asgrad.autograd`` as well as ``asgrad.gpu``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.tensor import Graph, OpCase, OpDef, all_ops, evaluate


def _float32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "f" else x


def _attrs32(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("float32" if v == "float64" else v) for k, v in attrs.items()}


def _grad_cases() -> list[Any]:
    params = []
    for op in all_ops():
        if op.cases is None or not op.differentiable:
            continue
        for i, case in enumerate(op.cases(np.random.default_rng(0))):
            if case.grad:
                params.append(pytest.param(op, case, id=f"{op.name}-{i}-{case.label}".strip("-")))
    return params


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "case"), _grad_cases())
def test_gradient_on_gpu_matches_cpu(device: Device, op: OpDef, case: OpCase) -> None:
    inputs = [_float32(np.asarray(x)) for x in case.inputs]
    g = Graph(f"grad-{op.name}")
    xs = [g.input(f"x{i}", x.shape, x.dtype.name, free=()) for i, x in enumerate(inputs)]
    out = g.apply(op.name, xs, _attrs32(case.attrs))
    wrt = (
        case.wrt
        if case.wrt is not None
        else [i for i, x in enumerate(inputs) if x.dtype.kind == "f"]
    )
    if not wrt or out.dtype not in ("float32", "float64"):
        pytest.skip("nothing differentiable")
    weights = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    loss = (out * g.constant(weights)).sum()
    grads = grad(loss, [xs[i] for i in wrt])
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    cpu = evaluate(grads, feeds, backend="cpu")
    gpu = evaluate(grads, feeds, backend="gpu")
    rtol, atol = op.tolerance
    for c, d in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(d, c, rtol=max(10 * rtol, 1e-5), atol=max(10 * atol, 1e-5))
