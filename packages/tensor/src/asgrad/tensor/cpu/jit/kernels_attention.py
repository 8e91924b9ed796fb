"""Compiled kernel of attention's masked softmax (`asgrad.tensor.cpu.jit.fuse_attention`).

`masked_softmax` is ``softmax(x * scale + mask)`` along the last axis in one pass over
each row of the scores, where ``mask`` is a constant (a causal mask: 0 on and below
the diagonal, ``-inf`` above) whose rows repeat over the rows of ``x``. Per row:
``x * scale + mask`` written into the result and its maximum taken (`row_max`, eight
lanes), ``exp_neg(t - max)`` written over it and summed in any order (`row_sum`),
then divided by the sum: the softmax row kernel's arithmetic
(`asgrad.tensor.cpu.jit.render_rows`), so every entry, ``-inf`` ones included, is
what the numpy path computes up to the sum's rounding (NaN and infinities as there).
Skipping the exponentials of a causal mask's ``-inf`` half was measured slower on rows
of 64 (0.42 ms against 0.31 ms for 4096 rows of float32: the loops of varying length
do not vectorise as well, and a row must still be checked for values that make
``inf + -inf``).

Its parallel form hands chunks of rows to the serial kernel over ``numba.prange``, each
row made by one thread as serially (the same bits); which form runs is the measured
thread choice of `asgrad.tensor.cpu.jit.threads` (transformer_large's scores,
``[32, 8, 256, 256]`` float32, at 16 threads on the device host: 23.3 ms serially,
2.2 ms over the threads, 2026-12-02).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import (
    exp_neg,
    fresh,
    kernel,
    parallel_kernel,
    prange,
    row_max,
    row_sum,
)
from asgrad.tensor.cpu.jit.threads import CHUNK, PARALLEL, TIMED, Site

__all__ = ["masked_softmax"]


@kernel
def _masked_softmax(x: Any, scale: Any, mask: Any, out: Any, lo: Any, hi: Any) -> None:
    n = x.shape[1]
    period = mask.shape[0]
    for r in range(lo, hi):
        mr = mask[r % period]
        xr = x[r]
        o = out[r]
        for j in range(n):
            o[j] = xr[j] * scale + mr[j]
        m = row_max(o)
        for j in range(n):
            o[j] = exp_neg(o[j] - m)
        s = row_sum(o)
        for j in range(n):
            o[j] = o[j] / s


@parallel_kernel
def _masked_softmax_p(x: Any, scale: Any, mask: Any, out: Any, step: Any) -> None:
    rows = x.shape[0]
    for c in prange((rows + step - 1) // step):
        lo = c * step
        _masked_softmax(x, scale, mask, out, lo, min(lo + step, rows))


# The serial-or-parallel choice (`asgrad.tensor.cpu.jit.threads`): each row is made by
# one thread with the serial kernel's code, so both forms give the same bits.
_site = Site(__name__)


def masked_softmax(
    x: np.ndarray, scale: Any, mask: np.ndarray, *, out: np.ndarray | None = None
) -> np.ndarray:
    """``softmax(x * scale + mask, axis=-1)`` for floating ``x`` with a last axis of at
    least one element; ``mask`` is 2-D, of ``x``'s dtype and last axis, its rows
    repeating over the rows of ``x`` (a mask whose shape ends ``x``'s, flattened).
    Written into ``out`` when it is C-contiguous (it may be ``x`` itself), else into
    a fresh array; over rows in parallel where the kernel's thread choice says so."""
    n = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, n)
    result = fresh(out, x.shape, x.dtype)
    rows, into, value = x2.shape[0], result.reshape(-1, n), x.dtype.type(scale)
    form = _site.form(result.size)
    start = perf_counter()
    if form & PARALLEL:
        _masked_softmax_p(x2, value, mask, into, max(1, CHUNK // n))
    else:
        _masked_softmax(x2, value, mask, into, 0, rows)
    if form & TIMED:
        _site.timed(result.size, form, perf_counter() - start)
    return result
