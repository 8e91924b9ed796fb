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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import exp_neg, fresh, kernel, row_max, row_sum

__all__ = ["masked_softmax"]


@kernel
def _masked_softmax(x: Any, scale: Any, mask: Any, out: Any) -> None:
    rows, n = x.shape
    period = mask.shape[0]
    for r in range(rows):
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


def masked_softmax(
    x: np.ndarray, scale: Any, mask: np.ndarray, *, out: np.ndarray | None = None
) -> np.ndarray:
    """``softmax(x * scale + mask, axis=-1)`` for floating ``x`` with a last axis of at
    least one element; ``mask`` is 2-D, of ``x``'s dtype and last axis, its rows
    repeating over the rows of ``x`` (a mask whose shape ends ``x``'s, flattened).
    Written into ``out`` when it is C-contiguous (it may be ``x`` itself), else into
    a fresh array."""
    n = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, n)
    result = fresh(out, x.shape, x.dtype)
    _masked_softmax(x2, x.dtype.type(scale), mask, result.reshape(-1, n))
    return result
