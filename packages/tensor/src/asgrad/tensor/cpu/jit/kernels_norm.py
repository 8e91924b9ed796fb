"""Compiled kernels of the norm family's fused line groups (`asgrad.tensor.cpu.jit.fuse_rows`).

`layer_norm_weight_grad` is a layer norm's weight gradient, ``sum over rows of
g * x_hat``, with ``x_hat`` (the normalized input, as the layer norm row kernel computes
it: mean and variance by reassociated sums, times ``1 / sqrt(var + eps)``) made row by
row in registers instead of written out and read back. The rows are added in the
blocks of `asgrad.tensor.cpu.jit.kernels_sum.blocks` (each block's rows in order, then
the blocks in order: numpy's order up to ``kernels_sum.ROWS`` rows), the blocks over
Numba's threads where the thread choice says so (`asgrad.tensor.cpu.jit.threads.Site`);
both forms give the same bits at any thread count.
"""

from __future__ import annotations

import math
from time import perf_counter
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import kernel, parallel_kernel, prange, row_sum, sums
from asgrad.tensor.cpu.jit.kernels_sum import blocks, combine_blocks
from asgrad.tensor.cpu.jit.threads import CHUNK, PARALLEL, TIMED, Site


@sums
def _centred_squares(row: Any, mean: Any) -> Any:
    s = row.dtype.type(0)
    for j in range(row.shape[0]):
        d = row[j] - mean
        s += d * d
    return s


@kernel
def _weight_grad_blocks(
    x: Any, g: Any, eps: Any, inv_n: Any, per: Any, lo: Any, hi: Any, partial: Any
) -> None:
    """Blocks ``lo`` to ``hi`` of rows: each block's ``g * x_hat`` rows added in order
    into its partial row."""
    one = x.dtype.type(1)
    for b in range(lo, hi):
        p = partial[b]
        for j in range(p.shape[0]):
            p[j] = 0
        for r in range(b * per, min(b * per + per, x.shape[0])):
            row = x[r]
            mean = row_sum(row) * inv_n
            var = _centred_squares(row, mean) * inv_n
            rstd = one / math.sqrt(var + eps)
            gr = g[r]
            for j in range(p.shape[0]):
                p[j] += gr[j] * ((row[j] - mean) * rstd)


@kernel
def _weight_grad(x: Any, g: Any, eps: Any, inv_n: Any, per: Any, partial: Any, out: Any) -> None:
    _weight_grad_blocks(x, g, eps, inv_n, per, 0, partial.shape[0], partial)
    combine_blocks(partial, 0, out.shape[0], out)


@parallel_kernel
def _weight_grad_p(
    x: Any, g: Any, eps: Any, inv_n: Any, per: Any, partial: Any, out: Any, band: Any
) -> None:
    for b in prange(partial.shape[0]):
        _weight_grad_blocks(x, g, eps, inv_n, per, b, b + 1, partial)
    n = out.shape[0]
    for c in prange((n + band - 1) // band):
        lo = c * band
        combine_blocks(partial, lo, min(lo + band, n), out)


_site = Site(__name__)


def layer_norm_weight_grad(g: np.ndarray, x: np.ndarray, *, eps: float) -> np.ndarray:
    """``sum(g * layer_norm(x), leading axes)`` for a layer norm over the last axis: a
    fresh array of ``x.shape[-1]`` elements; over Numba's threads where the thread
    choice says so (the same bits either way)."""
    n = x.shape[-1]
    dt = x.dtype.type
    out = np.empty(n, x.dtype)
    x2 = np.ascontiguousarray(x).reshape(-1, n)
    g2 = np.ascontiguousarray(g).reshape(-1, n)
    per, count = blocks(x2.shape[0])
    partial = np.empty((count, n), x.dtype)
    form = _site.form(x2.size)
    start = perf_counter()
    if form & PARALLEL:
        _weight_grad_p(x2, g2, dt(eps), dt(1.0 / n), per, partial, out, max(16, CHUNK // count))
    else:
        _weight_grad(x2, g2, dt(eps), dt(1.0 / n), per, partial, out)
    if form & TIMED:
        _site.timed(x2.size, form, perf_counter() - start)
    return out
