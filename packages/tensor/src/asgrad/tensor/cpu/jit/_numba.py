"""Numba, imported once with the cache set up, and the scalar helpers the kernels share.

Importing this module imports Numba (after `prepare_numba`
has pointed its on-disk cache at `cache_dir`); the code
generator imports it when it first picks a compiled kernel, never at ``import asgrad``.

Every kernel is compiled with `KERNEL` options: cached on disk, strict IEEE
arithmetic (``fastmath`` off, so no contraction into FMAs and no reassociation: the
elementwise kernels round as numpy does), and numpy's error model (a division by
zero gives inf or NaN instead of raising, which also lets loops with divisions
vectorise). Sums over rows are helpers made by `sums` (such as `row_sum`),
the one place allowed to reassociate (numpy's own sums are pairwise, not sequential),
so that they vectorise.

The kernels compiled here are serial; the rendered elementwise loops and row kernels
also have a parallel form, taken for large results (`asgrad.tensor.cpu.jit.threads`).
The convolution and max pooling kernels, which do far more work per element, run
their outer loops over images and channels in parallel (`parallel_kernel`).

``exp``, ``exp_neg``, ``tanh`` and ``erf`` are generic over float32 and float64: float32
gets branch-free forms that LLVM vectorises, written into the calling kernel as
instructions (`asgrad.tensor.cpu.jit._math32`: an exponential by range reduction and
a polynomial, within 2 ulp; tanh by a rational function, within 6 ulp; erf by
Abramowitz & Stegun 7.1.26, absolute error below 1e-6, as the float32 numpy paths),
float64 the C library's ``exp``, ``tanh`` and ``erf``. They
are the per-primitive helpers of the rendered expressions
(`asgrad.tensor.cpu.jit.render`) as well as the row kernels'.

Numba keys a kernel's on-disk cache on its own source file only: after editing a
helper here or a form in `asgrad.tensor.cpu.jit._math32`, clear the cache directory
(an installed release rewrites every file, which invalidates all of it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from asgrad.tensor.cpu import jit as _jit

_jit.prepare_numba()

import numba  # noqa: E402  # after the cache directory is set
from numba import types  # noqa: E402

from asgrad.tensor.cpu.jit import _math32  # noqa: E402  # imports Numba

__all__ = [
    "KERNEL",
    "erf",
    "exp",
    "exp_neg",
    "fresh",
    "kernel",
    "num_threads",
    "on_one_thread",
    "one_thread",
    "parallel_kernel",
    "prange",
    "row_max",
    "row_max_nan",
    "row_sum",
    "sums",
    "tanh",
    "types",
]

KERNEL: dict[str, Any] = {
    "cache": True,
    "fastmath": False,
    "error_model": "numpy",
    "nogil": True,
    "boundscheck": False,
}


def fresh(out: np.ndarray | None, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``out`` when it is C-contiguous (a kernel writes it flat), else a new array."""
    if out is not None and out.flags.c_contiguous:
        return out
    return np.empty(shape, dtype)


def kernel(fn: Any) -> Any:
    """``numba.njit`` with `KERNEL`'s options."""
    return numba.njit(**KERNEL)(fn)


prange = numba.prange


def num_threads() -> int:
    """Numba's thread count in the calling thread (a parallel kernel's threads)."""
    return int(numba.get_num_threads())


def on_one_thread(fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)`` with its `parallel_kernel` calls on this thread alone (`one_thread`
    without a context manager's cost: a routed kernel's every call goes through it)."""
    before = numba.get_num_threads()
    if before == 1:
        return fn(arg)
    numba.set_num_threads(1)
    try:
        return fn(arg)
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the `parallel_kernel` calls inside on this thread alone (Numba's thread
    count is per calling thread: other threads keep theirs)."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def parallel_kernel(fn: Any) -> Any:
    """``numba.njit`` with `KERNEL`'s options and ``parallel=True`` (its ``numba.prange``
    loops run on Numba's threads)."""
    return numba.njit(**KERNEL, parallel=True)(fn)


def exp(x: Any) -> Any:
    """e**x (in compiled kernels only): float32 through a form that vectorises."""
    return math.exp(x)


def exp_neg(x: Any) -> Any:
    """e**x for x <= 0 (in compiled kernels only)."""
    return math.exp(x)


def tanh(x: Any) -> Any:
    """The hyperbolic tangent (in compiled kernels only): float32 through a form that
    vectorises."""
    return math.tanh(x)


def erf(x: Any) -> Any:
    """The error function (in compiled kernels only)."""
    return math.erf(x)


_math32.register(exp, _math32.exp32, math.exp)
_math32.register(exp_neg, _math32.exp_neg32, math.exp)
_math32.register(tanh, _math32.tanh32, math.tanh)
_math32.register(erf, _math32.erf32, math.erf)


SUMS: dict[str, Any] = {**KERNEL, "fastmath": {"reassoc"}}


def sums(fn: Any) -> Any:
    """``numba.njit`` for a helper that sums in any order (`SUMS`; not inlined at
    Numba's level, which would compile it with the caller's flags)."""
    return numba.njit(**SUMS)(fn)


@sums
def row_sum(row: Any) -> Any:
    """The sum of a 1-D array, in any order (vectorised)."""
    s = row.dtype.type(0)
    for j in range(row.shape[0]):
        s += row[j]
    return s


@kernel
def row_max(row: Any) -> Any:
    """A row's maximum, in 8 independent lanes (which vectorise; a single running
    maximum does not without fast-math, nor do lanes that keep NaN: measured 0.64 ms
    against 1.76 ms for 4096 rows of 1024 float32). NaN elements are skipped unless
    the first is NaN: taken only where a row program sums the row again through
    NaN-propagating arithmetic (softmax's ``exp(x - max)``), so that a NaN makes its
    results NaN as numpy's max would (`row_max_nan` elsewhere)."""
    n = row.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    j = 0
    while j + 8 <= n:
        v = row[j]
        m0 = v if v > m0 else m0
        v = row[j + 1]
        m1 = v if v > m1 else m1
        v = row[j + 2]
        m2 = v if v > m2 else m2
        v = row[j + 3]
        m3 = v if v > m3 else m3
        v = row[j + 4]
        m4 = v if v > m4 else m4
        v = row[j + 5]
        m5 = v if v > m5 else m5
        v = row[j + 6]
        m6 = v if v > m6 else m6
        v = row[j + 7]
        m7 = v if v > m7 else m7
        j += 8
    while j < n:
        v = row[j]
        m0 = v if v > m0 else m0
        j += 1
    a = m0 if m0 > m1 else m1
    b = m2 if m2 > m3 else m3
    c = m4 if m4 > m5 else m5
    d = m6 if m6 > m7 else m7
    a = a if a > b else b
    c = c if c > d else d
    return a if a > c else c


@kernel
def row_max_nan(row: Any) -> Any:
    """A row's maximum, NaN if any element is NaN (numpy's), in one running lane."""
    m = row[0]
    for j in range(1, row.shape[0]):
        v = row[j]
        m = v if ((v > m or v != v) and m == m) else m
    return m
