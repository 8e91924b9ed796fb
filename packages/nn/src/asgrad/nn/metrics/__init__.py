"""Metrics: numpy arrays in, floats (or per-class arrays) out.

Classification metrics take integer labels, or scores (logits or probabilities) with one
extra trailing class axis, which are reduced by ``argmax``. Regression metrics take two
arrays of the same shape. Bad input raises [`MetricError`][asgrad.nn.MetricError] naming the metric
and the shapes. Streaming helpers (``RunningMean``, ``RunningStd``, ``EMA``, ...) accumulate
values over a training run; ``MetricLogger`` records them per step and
``EarlyStopping`` watches a validation metric. One module per concern:
`classification`, `regression`,
`running`, `logger` and
`early_stopping`.

Example:
    >>> import numpy as np
    >>> accuracy(np.array([0, 1, 1]), np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]))
    0.6666666666666666
    >>> mse(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    2.0
"""

from asgrad.nn.errors import MetricError
from asgrad.nn.metrics.classification import (
    Average,
    accuracy,
    confusion_matrix,
    f1_score,
    precision,
    recall,
    top_k_accuracy,
)
from asgrad.nn.metrics.early_stopping import EarlyStopping
from asgrad.nn.metrics.logger import MetricLogger, MetricWriter
from asgrad.nn.metrics.regression import (
    Multioutput,
    explained_variance,
    mae,
    mape,
    max_error,
    mse,
    r2_score,
    rmse,
)
from asgrad.nn.metrics.running import EMA, RunningMean, RunningMinMax, RunningStd

__all__ = [
    "EMA",
    "Average",
    "EarlyStopping",
    "MetricError",
    "MetricLogger",
    "MetricWriter",
    "Multioutput",
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
