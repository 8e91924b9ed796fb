"""Compiled row kernels: softmax, log-softmax, layer norm and its input gradient.

Each wrapper has the calling convention of an `IntoKernel`
(``fn(*inputs, out=None, **attrs)``; the result in ``out`` when it is given and
C-contiguous, else fresh) and the semantics of the op's numpy kernel, within the op's
tolerance: a row is read whole before any of it is written, so ``out`` may be the
normalised input (and the incoming gradient, for the backward op). Sums are
vectorised (reassociated, as numpy's pairwise sums are); float32 exponentials use
the vectorised ``exp_neg`` of `._numba`. NaN and infinities propagate as in
numpy: a NaN or +inf in a row makes the whole row NaN (so does a row of -inf).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import exp_neg, fresh, kernel, row_sum, sums

# -- softmax ------------------------------------------------------------------------------


@kernel
def _row_max(row: Any) -> Any:
    """A row's maximum, in 8 independent lanes (which vectorise; a single running maximum
    does not without fast-math). NaN elements are skipped unless the first is NaN: a NaN
    anywhere makes the softmax row NaN all the same, through its exponential in the sum,
    as numpy's NaN maximum does; +inf does it through inf - inf."""
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
def _softmax_rows(x: Any, out: Any, log: bool) -> None:
    for r in range(x.shape[0]):
        row, dst = x[r], out[r]
        m = _row_max(row)
        for j in range(row.shape[0]):
            dst[j] = exp_neg(row[j] - m)
        s = row_sum(dst)
        if log:  # dst is not row: log_softmax never writes into its input
            ls = math.log(s)
            for j in range(row.shape[0]):
                dst[j] = (row[j] - m) - ls
        else:
            for j in range(row.shape[0]):
                dst[j] = dst[j] / s


@kernel
def _softmax_slabs(x: Any, out: Any, log: bool) -> None:
    """Softmax over axis 1 of (pre, n, post) arrays, vectorised along post."""
    pre, n, post = x.shape
    m = np.empty(post, x.dtype)
    s = np.empty(post, x.dtype)
    for p in range(pre):
        m[:] = x[p, 0]
        for j in range(1, n):
            row = x[p, j]
            for q in range(post):
                v = row[q]
                m[q] = v if (v > m[q] or v != v) and m[q] == m[q] else m[q]
        s[:] = 0
        for j in range(n):
            row, dst = x[p, j], out[p, j]
            for q in range(post):
                e = exp_neg(row[q] - m[q])
                s[q] += e
                if not log:
                    dst[q] = e
        if log:
            for q in range(post):
                s[q] = math.log(s[q])
        for j in range(n):
            row, dst = x[p, j], out[p, j]
            for q in range(post):
                if log:
                    dst[q] = (row[q] - m[q]) - s[q]
                else:
                    dst[q] = dst[q] / s[q]


def _softmax_any(x: np.ndarray, out: np.ndarray | None, axis: int, log: bool) -> np.ndarray:
    x = np.ascontiguousarray(x)
    result = fresh(out, x.shape, x.dtype)
    if x.size == 0:
        return result
    axis = axis % x.ndim
    n = x.shape[axis]
    post = math.prod(x.shape[axis + 1 :])
    pre = x.size // (n * post)
    if post == 1:
        _softmax_rows(x.reshape(pre, n), result.reshape(pre, n), log)
    else:
        _softmax_slabs(x.reshape(pre, n, post), result.reshape(pre, n, post), log)
    return result


def softmax(x: np.ndarray, *, out: np.ndarray | None = None, axis: int) -> np.ndarray:
    """``softmax``'s kernel."""
    return _softmax_any(x, out, axis, False)


def log_softmax(x: np.ndarray, *, out: np.ndarray | None = None, axis: int) -> np.ndarray:
    """``log_softmax``'s kernel."""
    return _softmax_any(x, out, axis, True)


# -- layer norm ------------------------------------------------------------------------------


@sums
def _sum_sq_dev(row: Any, mean: Any) -> Any:
    ss = row.dtype.type(0)
    for j in range(row.shape[0]):
        c = row[j] - mean
        ss += c * c
    return ss


@kernel
def _row_moments(row: Any, inv_n: Any, eps: Any) -> Any:
    """``(mean, 1 / sqrt(var + eps))`` of a row, the variance from the centred values."""
    mean = row_sum(row) * inv_n
    ss = _sum_sq_dev(row, mean)
    return mean, row.dtype.type(1) / math.sqrt(ss * inv_n + eps)


@sums
def _grad_sums(grow: Any, row: Any, w: Any, affine: bool, mean: Any, rstd: Any) -> Any:
    """``(sum(g w), sum(g w x_hat))`` of a row."""
    sg = row.dtype.type(0)
    sgx = row.dtype.type(0)
    for j in range(row.shape[0]):
        gw = grow[j] * w[j] if affine else grow[j]
        sg += gw
        sgx += gw * ((row[j] - mean) * rstd)
    return sg, sgx


@kernel
def _layer_norm(x: Any, w: Any, b: Any, affine: bool, inv_n: Any, eps: Any, out: Any) -> None:
    for r in range(x.shape[0]):
        row, dst = x[r], out[r]
        mean, rstd = _row_moments(row, inv_n, eps)
        if affine:
            for j in range(row.shape[0]):
                dst[j] = (row[j] - mean) * rstd * w[j] + b[j]
        else:
            for j in range(row.shape[0]):
                dst[j] = (row[j] - mean) * rstd


@kernel
def _layer_norm_backward(
    g: Any, x: Any, w: Any, affine: bool, inv_n: Any, eps: Any, out: Any
) -> None:
    for r in range(x.shape[0]):
        row, grow, dst = x[r], g[r], out[r]
        mean, rstd = _row_moments(row, inv_n, eps)
        sg, sgx = _grad_sums(grow, row, w, affine, mean, rstd)
        mg, mgx = sg * inv_n, sgx * inv_n
        for j in range(row.shape[0]):
            gw = grow[j] * w[j] if affine else grow[j]
            dst[j] = (gw - mg - ((row[j] - mean) * rstd) * mgx) * rstd


def _rows(x: np.ndarray, normalized_shape: Any) -> tuple[int, int]:
    n = math.prod(x.shape[x.ndim - len(tuple(normalized_shape)) :])
    return (x.size // n if n else 0), n


def layer_norm(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    """``layer_norm``'s kernel."""
    x = np.ascontiguousarray(x)
    result = fresh(out, x.shape, x.dtype)
    rows, n = _rows(x, normalized_shape)
    if rows == 0 or n == 0:
        return result
    affine = weight is not None and bias is not None
    w = np.ascontiguousarray(weight).reshape(-1) if affine else np.empty(0, x.dtype)
    b = np.ascontiguousarray(bias).reshape(-1) if affine else np.empty(0, x.dtype)
    dt = x.dtype.type
    _layer_norm(x.reshape(rows, n), w, b, affine, dt(1.0 / n), dt(eps), result.reshape(rows, n))
    return result


def layer_norm_backward(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    """``layer_norm_backward``'s kernel."""
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    result = fresh(out, x.shape, x.dtype)
    rows, n = _rows(x, normalized_shape)
    if rows == 0 or n == 0:
        return result
    affine = weight is not None
    w = np.ascontiguousarray(weight).reshape(-1) if affine else np.empty(0, x.dtype)
    dt = x.dtype.type
    _layer_norm_backward(
        g.reshape(rows, n),
        x.reshape(rows, n),
        w,
        affine,
        dt(1.0 / n),
        dt(eps),
        result.reshape(rows, n),
    )
    return result
