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
gets branch-free forms that LLVM vectorises (an exponential by range reduction and a
polynomial, within 2 ulp; tanh by a rational function, within 6 ulp; erf by
Abramowitz & Stegun 7.1.26, absolute error below 1e-6, as the float32 numpy paths),
float64 the C library's ``exp``, ``tanh`` and ``erf``. They
are the per-primitive helpers of the rendered expressions
(`asgrad.tensor.cpu.jit.render`) as well as the row kernels'.

Numba keys a kernel's on-disk cache on its own source file only: after editing a
helper here, clear the cache directory (an installed release rewrites every file,
which invalidates all of it).
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
from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

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
    "overloads",
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


def _intrinsic(fn: Any) -> Any:
    return intrinsic(fn)


def overloads(stub: Any) -> Callable[[Callable[..., Any]], Any]:
    """Register the decorated function as ``stub``'s implementation in compiled code
    (inlined): it gets the argument types and returns the function to run."""

    def register(fn: Any) -> Any:
        return overload(stub)(fn)

    return register


@_intrinsic
def _f32_bits(typingctx: Any, x: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@_intrinsic
def _bits_f32(typingctx: Any, x: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


_F = np.float32
_MAGIC = _F(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer in the low bits
_MAGIC_BITS = np.int32(np.array(_MAGIC).view(np.int32))
_LOG2E = _F(1.4426950408889634)
_LN2_HI, _LN2_LO = _F(0.693145751953125), _F(1.428606765330187e-06)
_EXP_LOW = _F(-87.0)  # below: 0 (the true value is subnormal, under 1.7e-38)
_P = tuple(
    _F(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)


def inline(fn: Any) -> Any:
    """``numba.njit`` with `KERNEL`'s options for a scalar helper (LLVM inlines it;
    Numba's own inlining, at its IR level, compiles much more slowly)."""
    return numba.njit(**KERNEL)(fn)


@inline
def _exp_neg32(x: Any) -> Any:
    """e**x for float32 x <= 0 (NaN stays NaN), within 2 ulp; 0 below -87."""
    c = _EXP_LOW if x < _EXP_LOW else x  # NaN stays
    t = c * _LOG2E + _MAGIC
    n = t - _MAGIC
    r = c - n * _LN2_HI
    r = r - n * _LN2_LO
    p = _P[0]
    p = p * r + _P[1]
    p = p * r + _P[2]
    p = p * r + _P[3]
    p = p * r + _P[4]
    p = p * r + _P[5]
    p = p * r * r + r + _F(1.0)
    scale = _bits_f32(np.int32((_f32_bits(t) - _MAGIC_BITS + np.int32(127)) << np.int32(23)))
    return p * scale if x >= _EXP_LOW or x != x else _F(0.0)


_EXP_HIGH = _F(88.72283935546875)  # above: inf (the largest float32 is e**88.7228...)
_EXP_FLOOR = _F(-104.0)  # below: 0 (under the smallest subnormal)


@inline
def _exp32(x: Any) -> Any:
    """e**x for float32 x, within 2 ulp (subnormal results to 1e-45 absolute); branch
    free, so that a loop of it vectorises. The scale 2**n is applied in two halves,
    so that n may reach 128 or -150."""
    c = _EXP_FLOOR if x < _EXP_FLOOR else (_EXP_HIGH if x > _EXP_HIGH else x)  # NaN stays
    t = c * _LOG2E + _MAGIC
    n = t - _MAGIC
    r = c - n * _LN2_HI
    r = r - n * _LN2_LO
    p = _P[0]
    p = p * r + _P[1]
    p = p * r + _P[2]
    p = p * r + _P[3]
    p = p * r + _P[4]
    p = p * r + _P[5]
    p = p * r * r + r + _F(1.0)
    k = _f32_bits(t) - _MAGIC_BITS
    half = k >> np.int32(1)
    s1 = _bits_f32(np.int32((half + np.int32(127)) << np.int32(23)))
    s2 = _bits_f32(np.int32((k - half + np.int32(127)) << np.int32(23)))
    inf = _F(np.inf)
    return inf if x > _EXP_HIGH else (p * s1 * s2 if x == x else x)


def _float32_form(stub: Any, fast: Any, exact: Any = math.exp) -> None:
    """Compile ``stub`` as ``fast`` for float32 arguments and as ``exact`` (the C
    library's function) otherwise."""

    @overloads(stub)
    def _overload(x: Any) -> Any:
        if x == types.float32:

            def f32(x: Any) -> Any:
                return fast(x)

            f32.__qualname__ = f"{stub.__name__}_f32"
            return f32

        def f64(x: Any) -> Any:
            return exact(x)

        f64.__qualname__ = f"{stub.__name__}_f64"
        return f64


def exp(x: Any) -> Any:
    """e**x (in compiled kernels only): float32 through a form that vectorises."""
    return math.exp(x)


def exp_neg(x: Any) -> Any:
    """e**x for x <= 0 (in compiled kernels only)."""
    return math.exp(x)


_float32_form(exp, _exp32)
_float32_form(exp_neg, _exp_neg32)


# tanh for float32: Eigen's rational form (odd degree 13 over even degree 6, on
# [-7.905, 7.905], where it reaches 1), within 6 ulp; x itself below 4e-4.
_TANH_P = tuple(
    _F(c)
    for c in (
        -2.76076847742355e-16,
        2.00018790482477e-13,
        -8.60467152213735e-11,
        5.12229709037114e-08,
        1.48572235717979e-05,
        6.37261928875436e-04,
        4.89352455891786e-03,
    )
)
_TANH_Q = tuple(_F(c) for c in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03))
_TANH_Q0 = _F(4.89352518554385e-03)
_TANH_CLAMP, _TANH_TINY = _F(7.90531110763549805), _F(0.0004)


@inline
def _tanh32(x: Any) -> Any:
    """tanh(x) for float32 x, branch free (a loop of it vectorises: 0.4 ns an element
    where the C library's tanhf, which Numba calls, took 77 ns on the shared machine)."""
    c = -_TANH_CLAMP if x < -_TANH_CLAMP else (_TANH_CLAMP if x > _TANH_CLAMP else x)
    c2 = c * c
    p = _TANH_P[0]
    p = p * c2 + _TANH_P[1]
    p = p * c2 + _TANH_P[2]
    p = p * c2 + _TANH_P[3]
    p = p * c2 + _TANH_P[4]
    p = p * c2 + _TANH_P[5]
    p = p * c2 + _TANH_P[6]
    q = _TANH_Q[0]
    q = q * c2 + _TANH_Q[1]
    q = q * c2 + _TANH_Q[2]
    q = q * c2 + _TANH_Q0
    return c * p / q if abs(x) >= _TANH_TINY else x  # NaN stays


def tanh(x: Any) -> Any:
    """The hyperbolic tangent (in compiled kernels only): float32 through a form that
    vectorises."""
    return math.tanh(x)


_float32_form(tanh, _tanh32, math.tanh)


_ERF_P = _F(0.3275911)
_ERF_A = tuple(_F(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


@inline
def _erfc_abs32(a: Any) -> Any:
    """erfc(a) for float32 a >= 0 (Abramowitz & Stegun 7.1.26)."""
    t = _F(1.0) / (_F(1.0) + _ERF_P * a)
    y = _ERF_A[4]
    y = y * t + _ERF_A[3]
    y = y * t + _ERF_A[2]
    y = y * t + _ERF_A[1]
    y = y * t + _ERF_A[0]
    return y * t * _exp_neg32(-(a * a))


@inline
def _erf32(x: Any) -> Any:
    e = _F(1.0) - _erfc_abs32(abs(x))
    return e if x >= _F(0.0) else (-e if x < _F(0.0) else x)


def erf(x: Any) -> Any:
    """The error function (in compiled kernels only)."""
    return math.erf(x)


_float32_form(erf, _erf32, math.erf)


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
