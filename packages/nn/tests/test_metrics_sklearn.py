"""Metrics cross-checked against scikit-learn on random data (skipped without it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.nn import metrics
from asgrad.nn.metrics import Average

sk = pytest.importorskip("sklearn.metrics")


@pytest.fixture(params=[0, 1, 2])
def labels(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(request.param)
    y_true = rng.integers(0, 5, size=200)
    y_pred = np.where(rng.random(200) < 0.6, y_true, rng.integers(0, 5, size=200))
    return y_true, y_pred


@pytest.mark.parametrize("average", ["macro", "micro", "weighted", None])
def test_precision_recall_f1(labels: tuple[np.ndarray, np.ndarray], average: Any) -> None:
    t, p = labels
    for ours, theirs in [
        (metrics.precision, sk.precision_score),
        (metrics.recall, sk.recall_score),
        (metrics.f1_score, sk.f1_score),
    ]:
        np.testing.assert_allclose(
            ours(t, p, average=average), theirs(t, p, average=average, zero_division=0)
        )


def test_precision_with_a_missing_class() -> None:
    t = np.array([0, 0, 2, 2, 3])
    p = np.array([0, 2, 2, 2, 0])
    averages: list[Average] = ["macro", "weighted", "micro"]
    for average in averages:
        assert metrics.precision(t, p, average=average) == pytest.approx(
            sk.precision_score(t, p, average=average, zero_division=0)
        )
        assert metrics.f1_score(t, p, average=average) == pytest.approx(
            sk.f1_score(t, p, average=average, zero_division=0)
        )


def test_accuracy_and_confusion(labels: tuple[np.ndarray, np.ndarray]) -> None:
    t, p = labels
    assert metrics.accuracy(t, p) == pytest.approx(sk.accuracy_score(t, p))
    np.testing.assert_array_equal(metrics.confusion_matrix(t, p), sk.confusion_matrix(t, p))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k(k: int) -> None:
    rng = np.random.default_rng(k)
    scores = rng.random((100, 6))
    y = rng.integers(0, 6, size=100)
    expected = sk.top_k_accuracy_score(y, scores, k=k, labels=np.arange(6))
    assert metrics.top_k_accuracy(y, scores, k=k) == pytest.approx(expected)


@pytest.mark.parametrize("shape", [(50,), (50, 3)])
def test_regression(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    t = rng.normal(size=shape)
    p = t + rng.normal(scale=0.3, size=shape) + 0.1
    assert metrics.mse(t, p) == pytest.approx(sk.mean_squared_error(t, p))
    assert metrics.mae(t, p) == pytest.approx(sk.mean_absolute_error(t, p))
    assert metrics.mape(t, p) == pytest.approx(sk.mean_absolute_percentage_error(t, p))
    assert metrics.r2_score(t, p) == pytest.approx(sk.r2_score(t, p))
    assert metrics.explained_variance(t, p) == pytest.approx(sk.explained_variance_score(t, p))
    if len(shape) == 1:
        assert metrics.max_error(t, p) == pytest.approx(sk.max_error(t, p))
        assert metrics.rmse(t, p) == pytest.approx(np.sqrt(sk.mean_squared_error(t, p)))
    else:
        np.testing.assert_allclose(
            metrics.r2_score(t, p, multioutput="raw_values"),
            sk.r2_score(t, p, multioutput="raw_values"),
        )
