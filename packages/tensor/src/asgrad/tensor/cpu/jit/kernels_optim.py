"""Compiled kernels of the optim family: Adam's two updates, and the two fused in one pass.

Each wrapper has the calling convention of an `IntoKernel`
(``fn(*inputs, out=None, **attrs)``, the result in ``out`` when it is given and
C-contiguous, else fresh) and does the numpy kernels' arithmetic in the same order,
bit for bit. The loops read each element before writing it, so ``out`` may be any
input of the result's type. `adam_step` is the kernel of the fused line group
of `asgrad.tensor.cpu.jit.fuse`: both moments and the parameter step in one pass,
serially or over Numba's threads as measured per parameter size
(`asgrad.tensor.cpu.jit.threads.Site`), bit for bit the same either way.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import fresh, kernel, parallel_kernel, prange
from asgrad.tensor.cpu.jit.threads import CHUNK, PARALLEL, TIMED, Site


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


@kernel
def _adam_loop(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    g1: np.ndarray,
    g2: np.ndarray,
    b1: Any,
    c1: Any,
    b2: Any,
    c2: Any,
    step: Any,
    bc2: Any,
    eps: Any,
    decay: Any,
    has_decay: bool,
    m2: np.ndarray,
    v2: np.ndarray,
    p2: np.ndarray,
) -> None:
    for i in range(p.size):
        mi = m[i] * b1 + g1[i] * c1
        vi = v[i] * b2 + (g2[i] * g2[i]) * c2
        m2[i] = mi
        v2[i] = vi
        s = (step * mi) / (np.sqrt(vi) / bc2 + eps)
        p2[i] = (p[i] * decay if has_decay else p[i]) - s


@parallel_kernel
def _adam_loop_threads(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    g1: np.ndarray,
    g2: np.ndarray,
    b1: Any,
    c1: Any,
    b2: Any,
    c2: Any,
    step: Any,
    bc2: Any,
    eps: Any,
    decay: Any,
    has_decay: bool,
    m2: np.ndarray,
    v2: np.ndarray,
    p2: np.ndarray,
) -> None:
    """`_adam_loop` over Numba's threads: chunks of `CHUNK` elements, each run by the
    serial loop (so every element is computed as serially, bit for bit)."""
    n = p.size
    for c in prange((n + CHUNK - 1) // CHUNK):
        lo = c * CHUNK
        hi = min(lo + CHUNK, n)
        _adam_loop(
            p[lo:hi],
            m[lo:hi],
            v[lo:hi],
            g1[lo:hi],
            g2[lo:hi],
            b1,
            c1,
            b2,
            c2,
            step,
            bc2,
            eps,
            decay,
            has_decay,
            m2[lo:hi],
            v2[lo:hi],
            p2[lo:hi],
        )


# The serial-or-parallel choice of `adam_step`, measured per parameter size.
_site = Site("kernels_optim.adam_step")


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)


def adam_ema(
    m: np.ndarray,
    g: np.ndarray,
    *,
    out: np.ndarray | None = None,
    beta: float,
    square: bool,
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
    eps: float,
) -> np.ndarray:
    """``adam_update``'s kernel, bit for bit."""
    dt = p.dtype.type
    result = fresh(out, p.shape, p.dtype)
    fn = _adam_update if decay is None else _adam_update_decay
    args = (_flat(p), _flat(m), _flat(v), dt(step_size), dt(bc2_sqrt), dt(eps))
    fn(*args, dt(1.0 if decay is None else decay), result.reshape(-1))
    return result


def adam_step(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    g1: np.ndarray,
    g2: np.ndarray,
    step_size: np.ndarray,
    bc2_sqrt: np.ndarray,
    m_out: np.ndarray,
    v_out: np.ndarray,
    decay: np.ndarray | None = None,
    *,
    beta1: float,
    beta2: float,
    eps: float,
) -> np.ndarray:
    """Adam's two moments and parameter step in one pass: ``m_out`` and ``v_out``
    receive ``adam_ema(m, g1, beta1)`` and ``adam_ema(v, g2, beta2, square)``; returns
    ``adam_update(p, m_out, v_out, step_size, bc2_sqrt[, decay], eps)``, a fresh array."""
    dt = p.dtype.type
    out = np.empty(p.shape, p.dtype)
    flat = [a.reshape(-1) for a in (p, m, v, g1, g2)]  # views: the caller checked layouts
    form = _site.form(p.size)
    start = time.perf_counter()
    (_adam_loop_threads if form & PARALLEL else _adam_loop)(
        *flat,
        dt(beta1),
        dt(1.0 - beta1),
        dt(beta2),
        dt(1.0 - beta2),
        dt(step_size),
        dt(bc2_sqrt),
        dt(eps),
        dt(1.0 if decay is None else decay),
        decay is not None,
        m_out.reshape(-1),
        v_out.reshape(-1),
        out.reshape(-1),
    )
    if form & TIMED:
        _site.timed(p.size, form, time.perf_counter() - start)
    return out
