"""Helpers of the 3-D ops, which fold the depth axis into the 2-D ops' batch or channels.

``conv3d`` is a sum over the kernel's depth taps of ``conv2d`` on strided depth slices,
``max_pool3d`` the maximum over depth taps of ``max_pool2d``, and so on: the depth
axis is padded explicitly (`pad_axis`), sliced per tap (`depth_taps`) and
folded into the batch axis (`fold`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def triple(value: object) -> tuple[int, int, int]:
    """An attribute as three ints (depth, height, width)."""
    if isinstance(value, int | np.integer):
        return (int(value),) * 3
    items = tuple(int(v) for v in value)  # type: ignore[attr-defined]
    return items[0], items[1], items[2]


def pad_axis(x: Tensor, axis: int, before: int, after: int, value: float) -> Tensor:
    """``x`` with ``before`` and ``after`` elements of ``value`` along ``axis``; the
    padding takes ``x``'s run-time batch size (a ``where`` over a slice of ``x``)."""
    if not before and not after:
        return x
    g = x.graph
    edge = x[(slice(None),) * axis + (slice(0, 1),)]

    def block(width: int) -> Tensor:
        shape = [1] * x.ndim
        shape[axis] = width
        off = g.constant(np.zeros(shape, dtype=bool), "bool")
        return g.apply("where", (off, edge, g.constant(value, x.dtype)), {})

    parts = ([block(before)] if before else []) + [x] + ([block(after)] if after else [])
    return g.apply("concat", parts, {"axis": axis})


def depth_taps(xp: Tensor, kernel: int, stride: int, dilation: int, out: int) -> list[Tensor]:
    """For each depth tap k, the (N, C, out, H, W) slice it reads of the padded input."""
    return [
        xp[:, :, k * dilation : k * dilation + (out - 1) * stride + 1 : stride]
        for k in range(kernel)
    ]


def fold(x: Tensor) -> Tensor:
    """(N, C, D, H, W) to (N * D, C, H, W)."""
    _, c, _, h, w = x.shape
    return x.transpose(0, 2, 1, 3, 4).reshape(-1, c, h, w)


def unfold(y: Tensor, depth: int) -> Tensor:
    """(N * D, C, H, W) back to (N, C, D, H, W)."""
    _, c, h, w = y.shape
    return y.reshape(-1, depth, c, h, w).transpose(0, 2, 1, 3, 4)


def pad_np(x: np.ndarray, padding: tuple[int, int, int], value: float) -> np.ndarray:
    widths = ((0, 0), (0, 0), *((p, p) for p in padding))
    return np.pad(x, widths, constant_values=value)
