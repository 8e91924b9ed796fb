"""Metrics against hand-computed references (always run)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asgrad.nn.metrics import (
    EMA,
    EarlyStopping,
    MetricError,
    MetricLogger,
    RunningMean,
    RunningMinMax,
    RunningStd,
    accuracy,
    confusion_matrix,
    explained_variance,
    f1_score,
    mae,
    mape,
    max_error,
    mse,
    precision,
    r2_score,
    recall,
    rmse,
    top_k_accuracy,
)

# Three classes; counts worked out by hand from the confusion matrix
#   [[2, 0, 0],
#    [1, 1, 1],
#    [1, 0, 2]]          (rows: true class, columns: predicted class)
#   class 0: tp=2 fp=2 fn=0 -> P=1/2 R=1   F1=2/3
#   class 1: tp=1 fp=0 fn=2 -> P=1   R=1/3 F1=1/2
#   class 2: tp=2 fp=1 fn=1 -> P=2/3 R=2/3 F1=2/3
Y_TRUE = np.array([0, 0, 1, 1, 1, 2, 2, 2])
Y_PRED = np.array([0, 0, 1, 0, 2, 2, 2, 0])


def test_confusion_matrix() -> None:
    cm = confusion_matrix(Y_TRUE, Y_PRED)
    assert cm.tolist() == [[2, 0, 0], [1, 1, 1], [1, 0, 2]]
    assert confusion_matrix([0, 1], [1, 1], num_classes=4).shape == (4, 4)
    with pytest.raises(MetricError, match="num_classes=2"):
        confusion_matrix([0, 3], [0, 1], num_classes=2)


def test_per_class_and_averaged_scores() -> None:
    p = precision(Y_TRUE, Y_PRED, average=None)
    r = recall(Y_TRUE, Y_PRED, average=None)
    f = f1_score(Y_TRUE, Y_PRED, average=None)
    np.testing.assert_allclose(p, [0.5, 1.0, 2 / 3])
    np.testing.assert_allclose(r, [1.0, 1 / 3, 2 / 3])
    np.testing.assert_allclose(f, [2 / 3, 0.5, 2 / 3])
    assert precision(Y_TRUE, Y_PRED) == pytest.approx((0.5 + 1 + 2 / 3) / 3)
    assert recall(Y_TRUE, Y_PRED) == pytest.approx((1 + 1 / 3 + 2 / 3) / 3)
    support = np.array([2, 3, 3]) / 8
    assert f1_score(Y_TRUE, Y_PRED, average="weighted") == pytest.approx(
        float(support @ [2 / 3, 0.5, 2 / 3])
    )
    acc = 5 / 8
    assert accuracy(Y_TRUE, Y_PRED) == acc
    for fn in (precision, recall, f1_score):
        assert fn(Y_TRUE, Y_PRED, average="micro") == pytest.approx(acc)


def test_zero_division_and_absent_classes() -> None:
    # Class 1 is never predicted: its precision is zero_division.
    assert precision([0, 1], [0, 0], average=None, zero_division=1.0).tolist() == [
        0.5,
        1.0,
    ]
    # Label 1 occurs nowhere: macro averages over classes 0 and 2 only...
    assert recall([0, 2], [0, 2]) == 1.0
    # ...unless num_classes says all three classes count.
    assert recall([0, 2], [0, 2], num_classes=3) == pytest.approx(2 / 3)
    with pytest.raises(MetricError, match="average"):
        precision([0], [0], average="samples")  # type: ignore[call-overload]  # wrong on purpose


def test_accuracy_accepts_scores() -> None:
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 0.1, 3.0], [5.0, 0.0, 0.0]])
    assert accuracy([0, 2, 1], logits) == pytest.approx(2 / 3)
    assert accuracy(np.array([[1, 0]]), np.array([[[0.1, 0.9], [0.8, 0.2]]])) == 1.0


def test_classification_input_errors() -> None:
    with pytest.raises(MetricError, match=r"\(3,\)"):
        accuracy([0, 1, 2], [0, 1])
    with pytest.raises(MetricError, match="probabilities"):
        accuracy([0, 1], [0.2, 0.9])
    with pytest.raises(MetricError, match="non-empty"):
        accuracy([], [])
    with pytest.raises(MetricError, match="scores have shape"):
        accuracy([0, 1], np.zeros((3, 2)))


def test_top_k_accuracy() -> None:
    scores = np.array([[0.1, 0.5, 0.4], [0.6, 0.3, 0.1], [0.2, 0.3, 0.5]])
    y = np.array([2, 1, 0])
    assert top_k_accuracy(y, scores, k=1) == 0.0
    assert top_k_accuracy(y, scores, k=2) == pytest.approx(2 / 3)
    assert top_k_accuracy(y, scores, k=3) == 1.0
    with pytest.raises(MetricError, match="labels"):
        top_k_accuracy(np.array([3]), np.zeros((1, 3)), k=1)


def test_regression_metrics_by_hand() -> None:
    t = np.array([3.0, -0.5, 2.0, 7.0])
    p = np.array([2.5, 0.0, 2.0, 8.0])
    # errors: -0.5, 0.5, 0, 1
    assert mse(t, p) == pytest.approx((0.25 + 0.25 + 0 + 1) / 4)
    assert rmse(t, p) == pytest.approx(math.sqrt(0.375))
    assert mae(t, p) == pytest.approx(0.5)
    assert max_error(t, p) == 1.0
    assert mape(t, p) == pytest.approx((0.5 / 3 + 0.5 / 0.5 + 0 + 1 / 7) / 4)
    ss_tot = float(((t - t.mean()) ** 2).sum())
    assert r2_score(t, p) == pytest.approx(1 - 1.5 / ss_tot)
    err = t - p
    assert explained_variance(t, p) == pytest.approx(1 - err.var() / t.var())


def test_r2_multioutput_and_constant_targets() -> None:
    t = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    p = np.array([[1.0, 5.0], [2.0, 5.0], [4.0, 6.0]])
    raw = r2_score(t, p, multioutput="raw_values")
    np.testing.assert_allclose(raw, [0.5, 0.0])  # constant column, imperfect fit -> 0
    assert r2_score(t, p) == pytest.approx(0.25)
    assert r2_score([2.0, 2.0], [2.0, 2.0]) == 1.0


def test_regression_input_errors() -> None:
    with pytest.raises(MetricError, match="reshape"):
        mse(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(MetricError, match="NaN"):
        mae([1.0, math.nan], [1.0, 1.0])
    with pytest.raises(MetricError, match="two samples"):
        r2_score([1.0], [1.0])


def test_running_mean_and_std_match_numpy() -> None:
    rng = np.random.default_rng(0)
    chunks = [rng.normal(1e6, 2.0, size=n) for n in (1, 7, 100, 3)]
    everything = np.concatenate(chunks)
    mean, std = RunningMean(), RunningStd()
    for c in chunks:
        mean.update(c)
        std.update(c)
    assert mean.value == pytest.approx(everything.mean(), rel=1e-12)
    assert mean.count == everything.size
    # Welford/Chan stays accurate despite the large offset.
    assert std.var == pytest.approx(everything.var(), rel=1e-9)
    sample = RunningStd(ddof=1)
    sample.update(everything)
    assert sample.std == pytest.approx(everything.std(ddof=1), rel=1e-9)
    assert math.isnan(RunningMean().value)
    assert math.isnan(RunningStd().var)


def test_running_mean_weights_and_reset() -> None:
    m = RunningMean()
    m.update(2.0, weight=3)  # a batch mean of 3 samples
    m.update(6.0)
    assert m.value == pytest.approx(3.0)
    m.reset()
    assert m.count == 0


def test_running_min_max_and_ema() -> None:
    r = RunningMinMax()
    r.update(np.array([2.0, -3.0]))
    r.update(10.0)
    assert (r.min, r.max) == (-3.0, 10.0)
    e = EMA(decay=0.9, bias_correction=False)
    for _ in range(3):
        e.update(1.0)
    assert e.value == pytest.approx(1 - 0.9**3)
    corrected = EMA(decay=0.9)
    for _ in range(3):
        corrected.update(1.0)
    assert corrected.value == pytest.approx(1.0)
    with pytest.raises(MetricError):
        EMA(decay=1.0)


def test_metric_logger() -> None:
    log = MetricLogger()
    for step, loss in enumerate([1.0, 0.5, 0.75]):
        log.log(step, loss=loss)
    log.log(2, acc=0.9)
    assert log.values("loss") == [1.0, 0.5, 0.75]
    assert log.steps("acc") == [2]
    summary = log.summary()["loss"]
    assert summary == {"last": 0.75, "mean": 0.75, "min": 0.5, "max": 1.0, "count": 3.0}
    assert log.format(2) == "step 2: acc=0.9 loss=0.75"
    with pytest.raises(KeyError, match="acc, loss"):
        log.latest("val")
    restored = MetricLogger()
    restored.load_state_dict(log.state_dict())
    assert restored.history == log.history


def test_early_stopping_min_and_max() -> None:
    stop = EarlyStopping(patience=2, min_delta=0.1)
    decisions = [stop.step(v) for v in [1.0, 0.95, 0.85, 0.84, 0.8]]
    # 0.95 is not better by min_delta, 0.85 is; then 0.84 and 0.8 are not.
    assert decisions == [False, False, False, False, True]
    assert (stop.best, stop.best_step) == (0.85, 2)
    up = EarlyStopping(patience=1, mode="max")
    assert [up.step(v) for v in [0.5, 0.6, 0.6]] == [False, False, True]
    nan = EarlyStopping(patience=1)
    assert [nan.step(v) for v in [1.0, math.nan]] == [False, True]
    resumed = EarlyStopping(patience=2, min_delta=0.1)
    resumed.load_state_dict(stop.state_dict())
    assert resumed.should_stop
    assert resumed.best == 0.85
    with pytest.raises(MetricError, match="mode"):
        EarlyStopping(mode="up")  # type: ignore[arg-type]  # wrong on purpose
