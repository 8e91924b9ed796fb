"""The norm family on the GPU: softmax, log-softmax, layer norm, batch norm.

Each op is its row program (``OpDef.rows`` in ``asgrad/tensor/ops/norm.py``), rendered
into one row kernel (`asgrad.gpu.lowering.rows.row_kernel`): one workgroup per
normalised row (a softmax row, a layer-norm row, a batch-norm channel), one dispatch
per op.
"""

from __future__ import annotations

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.rows import row_kernel
from asgrad.tensor import TensorType, get_op

__all__ = [
    "LOWERINGS",
    "WGSL_FILES",
    "batch_norm",
    "batch_norm_backward",
    "layer_norm",
    "layer_norm_backward",
    "softmax",
]

WGSL_FILES: tuple[str, ...] = ("norm_rows.wgsl", "prelude.wgsl")

# What a plan's dispatch counts call each op's kernel (`asgrad.gpu.plan.dispatch_kinds`).
_KIND = {"softmax": "norm_softmax", "log_softmax": "norm_softmax"}


def _run(name: str, inputs: list[GpuArray], **attrs: object) -> GpuArray:
    """Op ``name``'s row program on ``inputs``."""
    rows = get_op(name).rows
    assert rows is not None
    program = rows(inputs[0].ndim, len(inputs), **attrs)
    return row_kernel(program, inputs, _KIND.get(name, "norm"))


def _given(*arrays: GpuArray | None) -> list[GpuArray]:
    return [a for a in arrays if a is not None]


def softmax(x: GpuArray, axis: int = -1, log: bool = False) -> GpuArray:
    """Softmax (``log=True``: log-softmax) of float32 ``x`` along ``axis``."""
    return _run("log_softmax" if log else "softmax", [x], axis=axis)


def layer_norm(
    x: GpuArray,
    axes: int,
    eps: float,
    weight: GpuArray | None = None,
    bias: GpuArray | None = None,
) -> GpuArray:
    """Layer norm over the trailing ``axes`` axes, affine when weight and bias are given."""
    shape = x.shape[x.ndim - axes :]
    affine = [weight, bias] if weight is not None and bias is not None else []
    return _run("layer_norm", [x, *affine], normalized_shape=shape, eps=eps)


def layer_norm_backward(
    g: GpuArray, x: GpuArray, axes: int, eps: float, weight: GpuArray | None = None
) -> GpuArray:
    """The input gradient of `layer_norm` for the output gradient ``g``."""
    shape = x.shape[x.ndim - axes :]
    return _run("layer_norm_backward", _given(g, x, weight), normalized_shape=shape, eps=eps)


def batch_norm(
    x: GpuArray, eps: float, weight: GpuArray | None = None, bias: GpuArray | None = None
) -> GpuArray:
    """Batch norm of (N, C, ...) over every axis but 1, affine when weight and bias are
    given."""
    affine = [weight, bias] if weight is not None and bias is not None else []
    return _run("batch_norm", [x, *affine], eps=eps)


def batch_norm_backward(
    g: GpuArray, x: GpuArray, eps: float, weight: GpuArray | None = None
) -> GpuArray:
    """The input gradient of `batch_norm` for the output gradient ``g``."""
    return _run("batch_norm_backward", _given(g, x, weight), eps=eps)


def _lower(name: str) -> Lowering:
    def lower_norm(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        return _run(name, ins, **attrs)

    return lower_norm


LOWERINGS: dict[str, Lowering] = {
    name: _lower(name)
    for name in (
        "softmax",
        "log_softmax",
        "layer_norm",
        "layer_norm_backward",
        "batch_norm",
        "batch_norm_backward",
    )
}
