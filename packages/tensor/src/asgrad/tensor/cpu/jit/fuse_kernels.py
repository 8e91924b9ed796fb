"""The Numba kernels of fused line groups (`asgrad.tensor.cpu.jit.fuse`).

Imported only when a generated function uses one (it imports Numba). Each kernel
computes its ops' formulas in the ops' dtype, operation by operation as the numpy
kernels do (``fastmath`` off: no contraction, no reassociation), in one pass.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


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


_adam_kernel = numba.njit(**_OPTIONS)(_adam_loop)


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
    _adam_kernel(
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
    return out
