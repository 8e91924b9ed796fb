"""Regression metrics: two float arrays of the same shape in, a float (or per output) out.

Bad input raises [`MetricError`][asgrad.nn.MetricError] naming the metric and the shapes.
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import MetricError

__all__ = [
    "Multioutput",
    "explained_variance",
    "mae",
    "mape",
    "max_error",
    "mse",
    "r2_score",
    "rmse",
]

Multioutput = Literal["uniform_average", "raw_values"]


def _pair(name: str, y_true: ArrayLike, y_pred: ArrayLike) -> tuple[NDArray[Any], ...]:
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape:
        raise MetricError(
            f"{name}: y_true has shape {t.shape} but y_pred has {p.shape}; they must "
            "match (reshape, e.g. y_pred.reshape(y_true.shape), if one is (n, 1))"
        )
    if t.size == 0:
        raise MetricError(f"{name}: inputs are empty")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        raise MetricError(f"{name}: inputs contain NaN or infinity")
    return t, p


def mse(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean squared error over all elements.

    Example:
        >>> mse([0.0, 0.0], [1.0, 3.0])
        5.0
    """
    t, p = _pair("mse", y_true, y_pred)
    return float(np.mean((t - p) ** 2))


def rmse(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Root mean squared error: ``sqrt(mse)``.

    Example:
        >>> rmse([0.0, 0.0], [3.0, 3.0])
        3.0
    """
    return math.sqrt(mse(y_true, y_pred))


def mae(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute error over all elements.

    Example:
        >>> mae([0.0, 0.0], [1.0, -3.0])
        2.0
    """
    t, p = _pair("mae", y_true, y_pred)
    return float(np.mean(np.abs(t - p)))


def mape(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute percentage error as a fraction (0.1 means 10%).

    The denominator is ``max(|y_true|, machine epsilon)``, as in scikit-learn, so a zero
    target gives a huge (finite) error rather than a division by zero.

    Example:
        >>> mape([100.0, 200.0], [110.0, 180.0])
        0.1
    """
    t, p = _pair("mape", y_true, y_pred)
    denom = np.maximum(np.abs(t), np.finfo(np.float64).eps)
    return float(np.mean(np.abs(t - p) / denom))


def max_error(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """The largest absolute error.

    Example:
        >>> max_error([1.0, 2.0, 3.0], [1.0, 5.0, 2.0])
        3.0
    """
    t, p = _pair("max_error", y_true, y_pred)
    return float(np.max(np.abs(t - p)))


def _per_output(
    name: str, y_true: ArrayLike, y_pred: ArrayLike
) -> tuple[NDArray[Any], NDArray[Any]]:
    t, p = _pair(name, y_true, y_pred)
    if t.ndim > 2:
        raise MetricError(f"{name}: expected (n,) or (n, outputs), got {t.shape}")
    if t.shape[0] < 2:
        raise MetricError(f"{name}: needs at least two samples, got {t.shape[0]}")
    return t.reshape(t.shape[0], -1), p.reshape(p.shape[0], -1)


def _score(
    num: NDArray[Any], den: NDArray[Any], multioutput: Multioutput
) -> float | NDArray[np.float64]:
    # Constant targets: a perfect fit scores 1, anything else 0 (scikit-learn's choice).
    score = np.where(den > 0, 1.0 - num / np.where(den > 0, den, 1.0), 0.0)
    score = np.where((den == 0) & (num == 0), 1.0, score)
    if multioutput == "raw_values":
        return np.asarray(score, dtype=np.float64)
    if multioutput != "uniform_average":
        raise MetricError(
            f"multioutput must be 'uniform_average' or 'raw_values', got {multioutput!r}"
        )
    return float(np.mean(score))


@overload
def r2_score(
    y_true: ArrayLike, y_pred: ArrayLike, multioutput: Literal["raw_values"]
) -> NDArray[np.float64]: ...
@overload
def r2_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    multioutput: Literal["uniform_average"] = ...,
) -> float: ...
def r2_score(
    y_true: ArrayLike, y_pred: ArrayLike, multioutput: Multioutput = "uniform_average"
) -> float | NDArray[np.float64]:
    """Coefficient of determination ``1 - SS_res / SS_tot`` (per output, then averaged).

    Example:
        >>> r2_score([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
        0.5
    """
    t, p = _per_output("r2_score", y_true, y_pred)
    ss_res = ((t - p) ** 2).sum(axis=0)
    ss_tot = ((t - t.mean(axis=0)) ** 2).sum(axis=0)
    return _score(ss_res, ss_tot, multioutput)


@overload
def explained_variance(
    y_true: ArrayLike, y_pred: ArrayLike, multioutput: Literal["raw_values"]
) -> NDArray[np.float64]: ...
@overload
def explained_variance(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    multioutput: Literal["uniform_average"] = ...,
) -> float: ...
def explained_variance(
    y_true: ArrayLike, y_pred: ArrayLike, multioutput: Multioutput = "uniform_average"
) -> float | NDArray[np.float64]:
    """``1 - Var(y_true - y_pred) / Var(y_true)``; unlike R^2 it ignores a bias.

    Example:
        >>> explained_variance([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        1.0
    """
    t, p = _per_output("explained_variance", y_true, y_pred)
    return _score(np.var(t - p, axis=0), np.var(t, axis=0), multioutput)
