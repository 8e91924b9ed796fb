"""``max_unpool2d``: values written back at the positions ``max_pool2d`` took them from.

The inverse of ``max_pool2d(..., return_indices=True)`` (PyTorch's): each value of
``x`` (N, C, h, w) goes to the flat position ``indices`` (``r * W + c``) of its plane in
an (N, C, H, W) result of zeros. The op expands into ``scatter`` (``scatter_reduce``)
along the flattened planes, with the gradient of a scatter-add: each value gets the
result's gradient at its index (a gather), as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.common import require_float
from asgrad.tensor.ir.dtypes import is_int
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, register_op

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, idx = types
    require_float(x)
    if not is_int(idx.dtype):
        raise DTypeError(f"indices must be integers (max_pool2d's return_indices), got {idx}")
    if len(x.shape) != 4 or idx.shape != x.shape:
        raise ShapeError(f"values (N, C, h, w) and indices of the same shape, got {x} and {idx}")
    h, w = (int(v) for v in attrs["output_size"])
    if h <= 0 or w <= 0:
        raise ShapeError(f"output_size must be positive, got {[h, w]}")
    return TensorType((*x.shape[:2], h, w), x.dtype)


def _unpool(x: np.ndarray, indices: np.ndarray, output_size: Sequence[int]) -> np.ndarray:
    n, c = x.shape[:2]
    h, w = output_size
    if indices.size and (indices.min() < 0 or indices.max() >= h * w):
        raise ShapeError(f"an index is outside the {h} x {w} output plane")
    out = np.zeros((n, c, h * w), dtype=x.dtype)
    np.put_along_axis(out, indices.reshape(n, c, -1), x.reshape(n, c, -1), axis=2)
    return out.reshape(n, c, h, w)


def _expand(x: Tensor, indices: Tensor, output_size: Sequence[int]) -> Tensor:
    g = x.graph
    _, c, h, w = x.shape
    out_h, out_w = (int(v) for v in output_size)
    flat = x.reshape(-1, c, h * w)
    off = g.constant(np.zeros((1, 1, out_h * out_w), dtype=bool), "bool")
    zeros = g.apply("where", (off, flat[:, :, :1], g.constant(0.0, x.dtype)), {})
    index = indices.cast("int64").reshape(-1, c, h * w)
    # The value is written (a position two windows chose gets its value once, as in
    # PyTorch); the gradient is a scatter-add's, so each value gets the result's
    # gradient at its position, as PyTorch's gather does. The added term is exactly 0
    # in value (masked where x is not finite, where x - x would be NaN).
    written = zeros.scatter(2, index, flat).detach()
    delta = g.apply("where", (flat.isfinite(), flat - flat.detach(), g.constant(0.0, x.dtype)), {})
    return (written + zeros.scatter_add(2, index, delta)).reshape(-1, c, out_h, out_w)


def _cases(rng: np.random.Generator) -> list[OpCase]:
    def case(n: int, c: int, h: int, w: int, out: tuple[int, int], label: str) -> OpCase:
        x = rng.standard_normal((n, c, h, w))
        # distinct positions in each plane, as max_pool2d with stride >= kernel gives
        idx = np.stack([rng.permutation(out[0] * out[1])[: h * w] for _ in range(n * c)]).reshape(
            n, c, h, w
        )
        return OpCase((x, idx.astype(np.int64)), {"output_size": out}, wrt=(0,), label=label)

    return [case(2, 3, 2, 2, (4, 4), "2x2 to 4x4"), case(1, 2, 3, 2, (7, 5), "uneven")]


register_op(
    OpDef(
        name="max_unpool2d",
        family="pool",
        infer=_infer,
        kernel=_unpool,
        expand=_expand,
        arity=2,
        cases=_cases,
        doc="values written back at max_pool2d's indices (r * W + c), zeros elsewhere",
    )
)


def unpool_size(
    shape: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]
) -> tuple[int, int]:
    """PyTorch's default output size: ``(h - 1) * stride - 2 * padding + kernel``."""
    a, b = ((shape[2 + i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(2))
    return a, b


__all__ = ["unpool_size"]
