"""Classification metrics: integer labels, or scores reduced by ``argmax``, in; floats out.

Scores (logits or probabilities) have one extra trailing class axis. Bad input raises
[`MetricError`][asgrad.nn.MetricError] naming the metric and the shapes.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import MetricError

__all__ = [
    "Average",
    "accuracy",
    "confusion_matrix",
    "f1_score",
    "precision",
    "recall",
    "top_k_accuracy",
]

Average = Literal["macro", "micro", "weighted"] | None


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
    """Recall ``tp / (tp + fn)``; ``average`` as in `precision`.

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
    """Harmonic mean of precision and recall; ``average`` as in `precision`.

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
