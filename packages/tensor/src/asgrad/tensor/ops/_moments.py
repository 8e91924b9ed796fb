"""Moments of the normalisations: the mean-and-variance passes of layer and batch norm."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``(x_hat, 1 / std)`` with the population variance over ``axes``."""
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    return centered * rstd, rstd


def normalize_backward(
    g: np.ndarray, x: np.ndarray, axes: tuple[int, ...], eps: float
) -> np.ndarray:
    """The input gradient of `normalize` for an incoming ``g`` (weight applied)."""
    x_hat, rstd = normalize(x, axes, eps)
    mean_g = np.mean(g, axis=axes, keepdims=True)
    mean_gx = np.mean(g * x_hat, axis=axes, keepdims=True)
    out: np.ndarray = rstd * (g - mean_g - x_hat * mean_gx)
    return out


def row_stats(
    x: np.ndarray, normalized_shape: Any, eps: float, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(x - mean, 1 / std, n)`` over the trailing axes, as (rows, n) and (rows, 1).

    ``x - mean`` is written into ``out`` (x's shape, contiguous; may be x) when given.
    """
    n = math.prod(x.shape[x.ndim - len(tuple(normalized_shape)) :])
    rows = x.reshape(-1, n)
    mean = np.add.reduce(rows, axis=1, keepdims=True)
    mean *= np.float32(1.0 / n)
    centered = rows - mean if out is None else np.subtract(rows, mean, out=out.reshape(-1, n))
    rstd = np.einsum("ij,ij->i", centered, centered)[:, None]
    rstd *= np.float32(1.0 / n)
    rstd += np.float32(eps)
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    return centered, rstd, n
