"""A strided copy over Numba's threads: a slice gradient assembled into its place.

`asgrad.tensor.cpu.jit.fuse_slices.assemble` copies each part of a gradient sum into
its slice of one array; attention's query, key and value gradients arrive in the heads'
layout (``[B, T, H, d]`` read from ``[B, H, T, d]``), a copy that numpy makes on one
thread (transformer_large's assembled ``qkv`` gradient, three parts of 4.2M float32,
took 14.7 ms a layer at 16 threads on the device host, 2026-12-02). `copy_into` has a
parallel form over the rows of the first two axes, chosen per size by measuring as
every compiled kernel's is (`asgrad.tensor.cpu.jit.threads.Site`); its serial form is
numpy's ``copyto`` itself. A copy is exact either way.

`reshaped` is a reshape that numpy would make by copying (attention's heads merged back,
``[B, H, T, d]`` read as ``[B, T, H * d]``: one copy of 4.2M float32 a layer in
transformer_large), with that copy made by `copy_into`
(`asgrad.tensor.cpu.jit.fuse_copies`).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import kernel, parallel_kernel, prange
from asgrad.tensor.cpu.jit.threads import CHUNK, PARALLEL, TIMED, Site

__all__ = ["copy_into", "reshaped"]


@kernel
def _copy_rows(src: Any, dst: Any, lo: Any, hi: Any) -> None:
    n1 = src.shape[1]
    for r in range(lo, hi):
        i = r // n1
        s = src[i, r - i * n1]
        d = dst[i, r - i * n1]
        for a in range(s.shape[0]):
            for b in range(s.shape[1]):
                d[a, b] = s[a, b]


@parallel_kernel
def _copy_rows_p(src: Any, dst: Any, step: Any) -> None:
    rows = src.shape[0] * src.shape[1]
    for c in prange((rows + step - 1) // step):
        lo = c * step
        _copy_rows(src, dst, lo, min(lo + step, rows))


_site = Site(__name__)


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``np.copyto(dst, src)`` for 4-D arrays of one shape and dtype; over Numba's
    threads where the thread choice says so (see the module docstring).

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.kernels_copy import copy_into
    >>> dst = np.zeros((1, 2, 3, 4))
    >>> copy_into(dst, np.ones((1, 3, 2, 4)).transpose(0, 2, 1, 3))
    >>> float(dst.sum())
    24.0
    """
    form = _site.form(dst.size)
    start = perf_counter()
    if form & PARALLEL:
        row = dst.shape[2] * dst.shape[3]
        _copy_rows_p(src, dst, max(1, CHUNK // max(1, row)))
    else:
        np.copyto(dst, src)
    if form & TIMED:
        _site.timed(dst.size, form, perf_counter() - start)


def reshaped(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x.reshape(shape)``: a view where numpy makes one, else a copy, of a 4-D ``x``
    by `copy_into` (over threads where its choice says so), of others by numpy.

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.kernels_copy import reshaped
    >>> x = np.arange(24.0).reshape(1, 2, 3, 4).transpose(0, 2, 1, 3)
    >>> bool((reshaped(x, (1, 3, 8)) == x.reshape(1, 3, 8)).all())
    True
    """
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:  # numpy would copy
        pass
    except TypeError:  # numpy < 2.1: no ``copy``
        if x.flags.c_contiguous:
            return x.reshape(shape)
    if x.ndim != 4:
        return x.reshape(shape)
    out = np.empty(x.shape, x.dtype)
    copy_into(out, x)
    return out.reshape(shape)
