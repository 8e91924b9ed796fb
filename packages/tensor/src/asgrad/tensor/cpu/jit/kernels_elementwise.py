"""Compiled elementwise kernels: exact GELU and its gradient, Adam's two updates.

Each wrapper has the calling convention of an `IntoKernel`
(``fn(*inputs, out=None, **attrs)``, the result in ``out`` when it is given and
C-contiguous, else fresh) and the semantics of the op's numpy kernel. The loops read
each element before writing it, so ``out`` may be any input of the result's type.

GELU in float32 uses the vectorised erf of `._numba` (absolute error below
1e-6, as the numpy float32 path); in float64 the C library's ``erf``. Adam's kernels
do the numpy kernels' arithmetic in the same order, bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import (
    _erfc_abs32,
    _exp_neg32,
    erf,
    fresh,
    kernel,
    overloads,
    types,
)

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_F = np.float32


@kernel
def _gelu(x: Any, out: Any) -> None:
    half, one, c = x.dtype.type(0.5), x.dtype.type(1.0), x.dtype.type(_INV_SQRT2)
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = half * v * (one + erf(v * c))


def _gelu_slope32(x: Any) -> Any:
    return x


@overloads(_gelu_slope32)
def _gelu_slope_overload(x: Any) -> Any:
    if x == types.float32:

        def f32(x: Any) -> Any:
            # Phi(x) + x phi(x): one exp(-x**2 / 2) serves erfc and the density.
            a = abs(x) * _F(_INV_SQRT2)
            e = _exp_neg32(-(a * a))
            half_erfc = _F(0.5) * _erfc_abs32(a)
            cdf = _F(1.0) - half_erfc if x >= _F(0.0) else half_erfc
            cdf = cdf if x == x else x
            return cdf + x * (e * _F(_INV_SQRT_2PI))

        return f32

    def f64(x: Any) -> Any:
        cdf = 0.5 * (1.0 + math.erf(x * _INV_SQRT2))
        pdf = math.exp(-0.5 * x * x) * _INV_SQRT_2PI
        return cdf + x * pdf

    return f64


@kernel
def _gelu_backward(g: Any, x: Any, out: Any) -> None:
    for i in range(x.shape[0]):
        out[i] = g[i] * _gelu_slope32(x[i])


@kernel
def _adam_ema(m: Any, g: Any, beta: Any, rest: Any, square: bool, out: Any) -> None:
    if square:
        for i in range(m.shape[0]):
            gi = g[i]
            out[i] = m[i] * beta + gi * gi * rest
    else:
        for i in range(m.shape[0]):
            out[i] = m[i] * beta + g[i] * rest


@kernel
def _adam_update(
    p: Any, m: Any, v: Any, step_size: Any, bc2: Any, eps: Any, decay: Any, out: Any
) -> None:
    for i in range(p.shape[0]):
        step = step_size * m[i] / (math.sqrt(v[i]) / bc2 + eps)
        out[i] = p[i] - step


@kernel
def _adam_update_decay(
    p: Any, m: Any, v: Any, step_size: Any, bc2: Any, eps: Any, decay: Any, out: Any
) -> None:
    for i in range(p.shape[0]):
        step = step_size * m[i] / (math.sqrt(v[i]) / bc2 + eps)
        out[i] = p[i] * decay - step


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)


def gelu(x: np.ndarray, *, out: np.ndarray | None = None, approximate: str = "none") -> np.ndarray:
    """``gelu``'s kernel (exact form)."""
    result = fresh(out, x.shape, x.dtype)
    _gelu(_flat(x), result.reshape(-1))
    return result


def gelu_backward(
    g: np.ndarray, x: np.ndarray, *, out: np.ndarray | None = None, approximate: str = "none"
) -> np.ndarray:
    """``gelu_backward``'s kernel (exact form)."""
    result = fresh(out, x.shape, x.dtype)
    _gelu_backward(_flat(g), _flat(x), result.reshape(-1))
    return result


def adam_ema(
    m: np.ndarray,
    g: np.ndarray,
    *,
    out: np.ndarray | None = None,
    beta: float,
    square: bool = False,
) -> np.ndarray:
    """``adam_ema``'s kernel, bit for bit."""
    dt = m.dtype.type
    result = fresh(out, m.shape, m.dtype)
    _adam_ema(_flat(m), _flat(g), dt(beta), dt(1.0 - beta), bool(square), result.reshape(-1))
    return result


def adam_update(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    step_size: np.ndarray,
    bc2_sqrt: np.ndarray,
    decay: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    eps: float = 1e-8,
) -> np.ndarray:
    """``adam_update``'s kernel, bit for bit."""
    dt = p.dtype.type
    result = fresh(out, p.shape, p.dtype)
    fn = _adam_update if decay is None else _adam_update_decay
    args = (_flat(p), _flat(m), _flat(v), dt(step_size), dt(bc2_sqrt), dt(eps))
    fn(*args, dt(1.0 if decay is None else decay), result.reshape(-1))
    return result
