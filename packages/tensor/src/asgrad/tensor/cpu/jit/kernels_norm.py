"""Compiled kernels of the norm family's fused line groups (`asgrad.tensor.cpu.jit.fuse_rows`).

`layer_norm_weight_grad` is a layer norm's weight gradient, ``sum over rows of
g * x_hat``, with ``x_hat`` (the normalized input, as the layer norm row kernel computes
it: mean and variance by reassociated sums, times ``1 / sqrt(var + eps)``) made row by
row in registers instead of written out and read back. The rows are added in order,
one after the other, as numpy's reduction over the leading axes adds them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import kernel, row_sum, sums


@sums
def _centred_squares(row: Any, mean: Any) -> Any:
    s = row.dtype.type(0)
    for j in range(row.shape[0]):
        d = row[j] - mean
        s += d * d
    return s


@kernel
def _weight_grad(x: Any, g: Any, eps: Any, inv_n: Any, out: Any) -> None:
    one = x.dtype.type(1)
    for j in range(out.shape[0]):
        out[j] = 0
    for r in range(x.shape[0]):
        row = x[r]
        mean = row_sum(row) * inv_n
        var = _centred_squares(row, mean) * inv_n
        rstd = one / math.sqrt(var + eps)
        gr = g[r]
        for j in range(out.shape[0]):
            out[j] += gr[j] * ((row[j] - mean) * rstd)


def layer_norm_weight_grad(g: np.ndarray, x: np.ndarray, *, eps: float) -> np.ndarray:
    """``sum(g * layer_norm(x), leading axes)`` for a layer norm over the last axis: a
    fresh array of ``x.shape[-1]`` elements."""
    n = x.shape[-1]
    dt = x.dtype.type
    out = np.empty(n, x.dtype)
    x2 = np.ascontiguousarray(x).reshape(-1, n)
    g2 = np.ascontiguousarray(g).reshape(-1, n)
    _weight_grad(x2, g2, dt(eps), dt(1.0 / n), out)
    return out
