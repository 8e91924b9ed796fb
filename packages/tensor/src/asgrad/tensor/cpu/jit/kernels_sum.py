"""Sums over leading axes (a bias's gradient) in blocks of rows, over Numba's threads.

numpy's ``add.reduce`` over the leading axes of a C-contiguous array adds the rows one
after the other on one thread (transformer_large's bias gradients: ``[32, 256, 2048]``
to ``[2048]``, 64 MiB read, a few ms each on the 16-core host, 2026-12-03). Split by
columns (each thread every row of a band of columns, numpy's order kept) it ran slower
than numpy there (docs/performance.md, "Attention's kernels over threads"): each thread
reads a short piece of each row, a page apart.

`leading_sum` reads the array as ``[rows, n]`` and splits the rows into blocks whose
size depends on the row count alone (`blocks`: `ROWS` rows, more where there would be
over `MAX_BLOCKS` blocks): each block's rows are added in order into a partial row,
then the partial rows are added in block order. Its parallel form runs the blocks (or,
where there are few, pieces of them: bands of their columns) over threads, then bands of
columns; every element is made by the same additions in the same
order in both forms, at any thread count, so the choice between them (measured per size
as every compiled kernel's is: `asgrad.tensor.cpu.jit.threads.Site`) never changes a
result. Up to `ROWS` rows there is one block: numpy's own order, bit for bit; above it
the sum differs from numpy's by rounding only (a sum of blocks is, if anything, closer
to the exact sum than one running sum).

`weight_grad_blocks` gives the layer norm's weight gradient
(`asgrad.tensor.cpu.jit.kernels_norm`) the same blocks.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import kernel, parallel_kernel, prange
from asgrad.tensor.cpu.jit.threads import CHUNK, PARALLEL, TIMED, Site

__all__ = ["MAX_BLOCKS", "ROWS", "blocks", "combine_blocks", "leading_sum"]

# Rows a block adds in order (up to this many rows, numpy's order exactly).
ROWS = 128
# At most this many blocks (their partial rows are kept until added): more rows make
# longer blocks.
MAX_BLOCKS = 256


def blocks(rows: int) -> tuple[int, int]:
    """(rows per block, blocks) for a sum over ``rows`` rows: a function of the row
    count alone, never of the threads.

    >>> from asgrad.tensor.cpu.jit.kernels_sum import blocks
    >>> blocks(100), blocks(8192), blocks(1_000_000)
    ((128, 1), (128, 64), (3907, 256))
    """
    per = max(ROWS, -(-rows // MAX_BLOCKS))
    return per, max(1, -(-rows // per))


@kernel
def _block_sums(x: Any, per: Any, lo: Any, hi: Any, partial: Any, c0: Any, c1: Any) -> None:
    """Blocks ``lo`` to ``hi``, columns ``c0`` to ``c1``: each block's rows added in
    order into its partial row (four rows a pass through the partial row,
    ``((p + r1) + r2) + ...``: the order of one row at a time, with a quarter of the
    partial row's loads and stores)."""
    for blk in range(lo, hi):
        r0 = blk * per
        end = min(r0 + per, x.shape[0])
        p = partial[blk]
        first = x[r0]
        for j in range(c0, c1):
            p[j] = first[j]
        r = r0 + 1
        while r + 4 <= end:  # four rows a pass, added left to right: the same order
            q1, q2, q3, q4 = x[r], x[r + 1], x[r + 2], x[r + 3]
            for j in range(c0, c1):
                p[j] = p[j] + q1[j] + q2[j] + q3[j] + q4[j]
            r += 4
        while r < end:
            row = x[r]
            for j in range(c0, c1):
                p[j] += row[j]
            r += 1


@kernel
def combine_blocks(partial: Any, lo: Any, hi: Any, out: Any) -> None:
    """Columns ``lo`` to ``hi`` of the partial rows, added in block order."""
    for j in range(lo, hi):
        out[j] = partial[0, j]
    for b in range(1, partial.shape[0]):
        p = partial[b]
        for j in range(lo, hi):
            out[j] += p[j]


@kernel
def _sum_serial(x: Any, per: Any, partial: Any, out: Any) -> None:
    _block_sums(x, per, 0, partial.shape[0], partial, 0, out.shape[0])
    combine_blocks(partial, 0, out.shape[0], out)


@parallel_kernel
def _sum_parallel(x: Any, per: Any, partial: Any, out: Any, cols: Any, band: Any) -> None:
    n = out.shape[0]
    bands = (n + cols - 1) // cols
    for t in prange(partial.shape[0] * bands):  # (block, band of columns) pairs
        blk = t // bands
        c0 = (t - blk * bands) * cols
        _block_sums(x, per, blk, blk + 1, partial, c0, min(c0 + cols, n))
    for c in prange((n + band - 1) // band):
        lo = c * band
        combine_blocks(partial, lo, min(lo + band, n), out)


_site = Site(__name__)


def leading_sum(x: np.ndarray, n: int) -> np.ndarray:
    """The sum of ``x`` over its leading axes, as ``[rows, n]`` (``n``: the product of
    the axes kept, trailing): a fresh array of ``n`` elements, in blocks of rows (see
    the module docstring); over Numba's threads where the thread choice says so.

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.kernels_sum import leading_sum
    >>> leading_sum(np.arange(12.0).reshape(2, 3, 2), 2).tolist()
    [30.0, 36.0]
    """
    if n == 0 or x.size == 0:
        return np.zeros(n, x.dtype)
    x2 = np.ascontiguousarray(x).reshape(-1, n)
    out = np.empty(n, x2.dtype)
    rows = x2.shape[0]
    per, count = blocks(rows)
    partial = np.empty((count, n), x2.dtype)
    form = _site.form(x2.size)
    start = perf_counter()
    if form & PARALLEL:
        # Enough (block, columns) pieces for the threads even with few blocks (a
        # positional embedding's gradient: 32 rows of 131,072): which piece a thread
        # takes changes no element's additions.
        cols = max(1024, -(-n // max(1, 64 // count)))
        _sum_parallel(x2, per, partial, out, cols, max(16, CHUNK // max(1, count)))
    else:
        _sum_serial(x2, per, partial, out)
    if form & TIMED:
        _site.timed(x2.size, form, perf_counter() - start)
    return out
