"""Metrics: numpy arrays in, floats (or per-class arrays) out.

Classification metrics take integer labels, or scores (logits or probabilities) with one
extra trailing class axis, which are reduced by ``argmax``. Regression metrics take two
arrays of the same shape. Bad input raises :class:`MetricError` naming the metric and
the shapes. Streaming helpers (``RunningMean``, ``RunningStd``, ``EMA``, ...) accumulate
values over a training run; ``EarlyStopping`` watches a validation metric.

Example:
    >>> import numpy as np
    >>> accuracy(np.array([0, 1, 1]), np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]))
    0.6666666666666666
    >>> mse(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    2.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import MetricError

__all__ = [
    "EMA",
    "EarlyStopping",
    "MetricError",
    "MetricLogger",
    "RunningMean",
    "RunningMinMax",
    "RunningStd",
    "accuracy",
    "confusion_matrix",
    "explained_variance",
    "f1_score",
    "mae",
    "mape",
    "max_error",
    "mse",
    "precision",
    "r2_score",
    "recall",
    "rmse",
    "top_k_accuracy",
]

Average = Literal["macro", "micro", "weighted"] | None
Multioutput = Literal["uniform_average", "raw_values"]

# --------------------------------------------------------------------------------
# classification


def _labels(name: str, y_true: ArrayLike, y_pred: ArrayLike) -> tuple[NDArray[Any], ...]:
    """Validate and return integer label arrays, applying argmax to score arrays."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if t.ndim == 0 or t.size == 0:
        raise MetricError(f"{name}: y_true must be a non-empty array, got shape {t.shape}")
    if p.ndim == t.ndim + 1:
        if p.shape[:-1] != t.shape:
            raise MetricError(
                f"{name}: scores have shape {p.shape}, expected {t.shape} + (classes,)"
            )
        p = p.argmax(axis=-1)
    elif p.shape != t.shape:
        raise MetricError(
            f"{name}: y_pred has shape {p.shape} but y_true has {t.shape}; pass labels "
            f"of the same shape or scores of shape {(*t.shape, -1)}"
        )
    for what, a in (("y_true", t), ("y_pred", p)):
        integral = np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)
        if not integral and not np.all(np.mod(a, 1) == 0):
            raise MetricError(
                f"{name}: {what} must hold integer class labels, got non-integer "
                "values; "
                "for binary probabilities pass (p > 0.5).astype(int) or shape (n, 2)"
            )
    return t.astype(np.int64).ravel(), p.astype(np.int64).ravel()


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Fraction of correct predictions; ``y_pred`` is labels or scores (argmax).

    Example:
        >>> import numpy as np
        >>> accuracy(np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1]))
        0.75
    """
    t, p = _labels("accuracy", y_true, y_pred)
    return float(np.mean(t == p))


def confusion_matrix(
    y_true: ArrayLike, y_pred: ArrayLike, num_classes: int | None = None
) -> NDArray[np.int64]:
    """Counts ``C[i, j]`` of samples of true class ``i`` predicted as class ``j``.

    Classes are ``0 .. num_classes - 1``; by default ``num_classes`` is one more than
    the largest label seen.

    Example:
        >>> import numpy as np
        >>> confusion_matrix(np.array([0, 1, 1]), np.array([0, 0, 1])).tolist()
        [[1, 0], [1, 1]]
    """
    t, p = _labels("confusion_matrix", y_true, y_pred)
    if min(t.min(), p.min()) < 0:
        raise MetricError("confusion_matrix: class labels must be non-negative")
    k = int(max(t.max(), p.max())) + 1 if num_classes is None else num_classes
    if max(t.max(), p.max()) >= k:
        raise MetricError(
            f"confusion_matrix: found label {max(t.max(), p.max())} but num_classes={num_classes}"
        )
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k).astype(np.int64)


def _divide(num: NDArray[Any], den: NDArray[Any], zero_division: float) -> NDArray[Any]:
    out = np.full(num.shape, zero_division, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _prf(
    name: str,
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average,
    num_classes: int | None,
    zero_division: float,
) -> tuple[float | NDArray[np.float64], ...]:
    if average not in ("macro", "micro", "weighted", None):
        raise MetricError(
            f"{name}: average must be 'macro', 'micro', 'weighted' or None, got {average!r}"
        )
    t, p = _labels(name, y_true, y_pred)
    cm = confusion_matrix(t, p, num_classes).astype(np.float64)
    if average == "micro":
        # Single-label data: every false positive is another class's false negative,
        # so micro precision, recall and F1 all equal accuracy.
        micro = float(np.trace(cm) / cm.sum())
        return micro, micro, micro
    tp = np.diag(cm)
    prec = _divide(tp, cm.sum(axis=0), zero_division)
    rec = _divide(tp, cm.sum(axis=1), zero_division)
    f1 = _divide(2 * prec * rec, prec + rec, zero_division)
    if average is None:
        return prec, rec, f1
    if average == "weighted":
        weights = cm.sum(axis=1)
    elif num_classes is None:
        # Like scikit-learn: average over the labels that occur in y_true or y_pred.
        weights = ((cm.sum(axis=0) + cm.sum(axis=1)) > 0).astype(np.float64)
    else:
        weights = np.ones(cm.shape[0])
    return tuple(float(np.average(m, weights=weights)) for m in (prec, rec, f1))


@overload
def precision(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: None,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> NDArray[np.float64]: ...
@overload
def precision(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Literal["macro", "micro", "weighted"] = ...,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> float: ...
def precision(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    num_classes: int | None = None,
    zero_division: float = 0.0,
) -> float | NDArray[np.float64]:
    """Precision ``tp / (tp + fp)``, per class (``average=None``) or averaged.

    ``"macro"``: unweighted mean over classes; ``"micro"``: from global counts (equals
    accuracy for single-label data); ``"weighted"``: mean weighted by class support.
    Per-class arrays are indexed by class id. Macro averages run over the classes that
    occur in ``y_true`` or ``y_pred``, or over all ``num_classes`` when that is given.
    A class never predicted scores ``zero_division``.

    Example:
        >>> import numpy as np
        >>> precision(np.array([0, 1, 1, 1]), np.array([0, 1, 0, 0]), average=None)
        array([0.33333333, 1.        ])
    """
    return _prf("precision", y_true, y_pred, average, num_classes, zero_division)[0]


@overload
def recall(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: None,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> NDArray[np.float64]: ...
@overload
def recall(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Literal["macro", "micro", "weighted"] = ...,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> float: ...
def recall(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    num_classes: int | None = None,
    zero_division: float = 0.0,
) -> float | NDArray[np.float64]:
    """Recall ``tp / (tp + fn)``; ``average`` as in :func:`precision`.

    Example:
        >>> import numpy as np
        >>> recall(np.array([0, 1, 1, 1]), np.array([0, 1, 0, 0]))
        0.6666666666666666
    """
    return _prf("recall", y_true, y_pred, average, num_classes, zero_division)[1]


@overload
def f1_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: None,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> NDArray[np.float64]: ...
@overload
def f1_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Literal["macro", "micro", "weighted"] = ...,
    num_classes: int | None = ...,
    zero_division: float = ...,
) -> float: ...
def f1_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    num_classes: int | None = None,
    zero_division: float = 0.0,
) -> float | NDArray[np.float64]:
    """Harmonic mean of precision and recall; ``average`` as in :func:`precision`.

    Example:
        >>> import numpy as np
        >>> round(f1_score(np.array([0, 1, 1, 1]), np.array([0, 1, 0, 0])), 4)
        0.5
    """
    return _prf("f1_score", y_true, y_pred, average, num_classes, zero_division)[2]


def top_k_accuracy(y_true: ArrayLike, scores: ArrayLike, k: int = 5) -> float:
    """Fraction of samples whose true class is among the ``k`` highest scores.

    A sample counts as a hit when fewer than ``k`` classes score strictly higher than
    its true class (ties are resolved in the sample's favour).

    Example:
        >>> import numpy as np
        >>> s = np.array([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]])
        >>> top_k_accuracy(np.array([1, 0]), s, k=2)
        0.5
    """
    t, s = np.asarray(y_true), np.asarray(scores, dtype=np.float64)
    if t.ndim != 1 or s.ndim != 2 or s.shape[0] != t.shape[0] or t.size == 0:
        raise MetricError(
            f"top_k_accuracy: need labels (n,) and scores (n, classes), got {t.shape} and {s.shape}"
        )
    if not k >= 1:
        raise MetricError(f"top_k_accuracy: k must be >= 1, got {k}")
    if not np.issubdtype(t.dtype, np.integer) or t.min() < 0 or t.max() >= s.shape[1]:
        raise MetricError(
            f"top_k_accuracy: labels must be integers in [0, {s.shape[1]}) to index "
            "the score columns"
        )
    true_scores = s[np.arange(t.size), t]
    higher = (s > true_scores[:, None]).sum(axis=1)
    return float(np.mean(higher < k))


# --------------------------------------------------------------------------------
# regression


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


# --------------------------------------------------------------------------------
# streaming statistics


def _values(x: float | ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64).ravel()


class RunningMean:
    """Mean of a stream of values; ``update`` takes a scalar or an array of values.

    ``update(value, weight=n)`` counts a batch mean as ``n`` observations.

    Example:
        >>> m = RunningMean()
        >>> m.update(1.0); m.update([2.0, 3.0]); m.value
        2.0
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0.0

    def update(self, value: float | ArrayLike, weight: float = 1.0) -> None:
        v = _values(value)
        self.total += float(v.sum()) * weight
        self.count += v.size * weight

    @property
    def value(self) -> float:
        """The mean so far (NaN before the first update)."""
        return self.total / self.count if self.count else math.nan


class RunningStd:
    """Mean, variance and standard deviation of a stream (Welford/Chan, numerically
    stable; whole arrays are merged at once).

    Example:
        >>> s = RunningStd()
        >>> s.update([1.0, 2.0]); s.update([3.0, 4.0])
        >>> s.mean, s.var
        (2.5, 1.25)
    """

    def __init__(self, ddof: int = 0) -> None:
        self.ddof = ddof
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.mean = math.nan
        self._m2 = 0.0

    def update(self, value: float | ArrayLike) -> None:
        v = _values(value)
        if v.size == 0:
            return
        n_b, mean_b = v.size, float(v.mean())
        m2_b = float(((v - mean_b) ** 2).sum())
        if self.count == 0:
            self.count, self.mean, self._m2 = n_b, mean_b, m2_b
            return
        n = self.count + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self._m2 += m2_b + delta**2 * self.count * n_b / n
        self.count = n

    @property
    def var(self) -> float:
        """Variance with ``ddof`` (0: population); NaN with too few values."""
        return self._m2 / (self.count - self.ddof) if self.count > self.ddof else math.nan

    @property
    def std(self) -> float:
        return math.sqrt(self.var)


class RunningMinMax:
    """Smallest and largest value of a stream.

    Example:
        >>> r = RunningMinMax()
        >>> r.update([3.0, -1.0]); r.update(7.0)
        >>> r.min, r.max
        (-1.0, 7.0)
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.min = math.inf
        self.max = -math.inf

    def update(self, value: float | ArrayLike) -> None:
        v = _values(value)
        if v.size:
            self.min = min(self.min, float(v.min()))
            self.max = max(self.max, float(v.max()))


class EMA:
    """Exponential moving average ``v = decay * v + (1 - decay) * x``.

    With ``bias_correction=True`` (the default) ``value`` divides by ``1 - decay**t`` as
    in Adam, so early values are not biased towards zero.

    Example:
        >>> e = EMA(decay=0.5)
        >>> e.update(4.0); e.value
        4.0
        >>> e.update(0.0); e.value  # (0.5*2 + 0) / (1 - 0.25)
        1.3333333333333333
    """

    def __init__(self, decay: float = 0.9, bias_correction: bool = True) -> None:
        if not 0.0 <= decay < 1.0:
            raise MetricError(f"EMA: decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.bias_correction = bias_correction
        self.reset()

    def reset(self) -> None:
        self._raw = 0.0
        self.steps = 0

    def update(self, value: float) -> None:
        self._raw = self.decay * self._raw + (1.0 - self.decay) * float(value)
        self.steps += 1

    @property
    def value(self) -> float:
        if self.steps == 0:
            return math.nan
        if self.bias_correction:
            return self._raw / (1.0 - self.decay**self.steps)
        return self._raw


class MetricLogger:
    """Record named scalars per step and summarise them.

    Example:
        >>> log = MetricLogger()
        >>> log.log(0, loss=1.0, acc=0.5)
        >>> log.log(1, loss=0.5)
        >>> log.latest("loss"), log.summary()["loss"]["min"]
        (0.5, 0.5)
    """

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[int, float]]] = {}

    def log(self, step: int, **values: float) -> None:
        for name, value in values.items():
            v = float(value)
            self.history.setdefault(name, []).append((step, v))

    def values(self, name: str) -> list[float]:
        """All values logged under ``name``, in order."""
        return [v for _, v in self._series(name)]

    def steps(self, name: str) -> list[int]:
        return [s for s, _ in self._series(name)]

    def latest(self, name: str) -> float:
        return self._series(name)[-1][1]

    def _series(self, name: str) -> list[tuple[int, float]]:
        if name not in self.history:
            known = ", ".join(sorted(self.history)) or "none yet"
            raise KeyError(f"MetricLogger: no metric {name!r} (logged: {known})")
        return self.history[name]

    def summary(self) -> dict[str, dict[str, float]]:
        """Per name: ``last``, ``mean``, ``min``, ``max``, ``count`` (JSON-able)."""
        out: dict[str, dict[str, float]] = {}
        for name, series in self.history.items():
            v = np.array([x for _, x in series], dtype=np.float64)
            out[name] = {
                "last": float(v[-1]),
                "mean": float(v.mean()),
                "min": float(v.min()),
                "max": float(v.max()),
                "count": float(v.size),
            }
        return out

    def format(self, step: int | None = None) -> str:
        """One line with the latest value of every metric, e.g. for a progress bar."""
        parts = [f"{k}={s[-1][1]:.4g}" for k, s in sorted(self.history.items())]
        return (f"step {step}: " if step is not None else "") + " ".join(parts)

    def state_dict(self) -> dict[str, list[list[float]]]:
        return {k: [[s, v] for s, v in series] for k, series in self.history.items()}

    def load_state_dict(self, state: Mapping[str, Iterable[Iterable[float]]]) -> None:
        self.history = {k: [(int(s), float(v)) for s, v in series] for k, series in state.items()}


class EarlyStopping:
    """Stop training once a metric has not improved for ``patience`` checks.

    An improvement is a value below ``best - min_delta`` (``mode="min"``, e.g. a loss)
    or above ``best + min_delta`` (``mode="max"``, e.g. accuracy). NaN never improves.

    Example:
        >>> stop = EarlyStopping(patience=2, mode="min")
        >>> [stop.step(v) for v in [1.0, 0.9, 0.95, 0.91]]
        [False, False, False, True]
        >>> stop.best, stop.best_step
        (0.9, 1)
    """

    def __init__(
        self,
        patience: int = 10,
        min_delta: float = 0.0,
        mode: Literal["min", "max"] = "min",
    ) -> None:
        if mode not in ("min", "max"):
            raise MetricError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}")
        if patience < 0 or min_delta < 0:
            raise MetricError("EarlyStopping: patience and min_delta must be >= 0")
        self.patience = patience
        self.min_delta = min_delta
        self.mode = mode
        self.best = math.inf if mode == "min" else -math.inf
        self.best_step = -1
        self.num_bad = 0
        self.steps = 0
        self.should_stop = False

    def is_improvement(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def step(self, value: float) -> bool:
        """Record one check of the metric; return True when training should stop."""
        value = float(value)
        if self.is_improvement(value):
            self.best, self.best_step, self.num_bad = value, self.steps, 0
        else:
            self.num_bad += 1
        self.steps += 1
        self.should_stop = self.num_bad >= self.patience
        return self.should_stop

    def state_dict(self) -> dict[str, float | int | bool]:
        return {
            "best": self.best,
            "best_step": self.best_step,
            "num_bad": self.num_bad,
            "steps": self.steps,
            "should_stop": self.should_stop,
        }

    def load_state_dict(self, state: dict[str, float | int | bool]) -> None:
        self.best = float(state["best"])
        self.best_step = int(state["best_step"])
        self.num_bad = int(state["num_bad"])
        self.steps = int(state["steps"])
        self.should_stop = bool(state["should_stop"])
