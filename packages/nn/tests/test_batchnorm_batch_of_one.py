"""Batch normalisation refuses to train on one value per channel.

PyTorch raises "Expected more than 1 value per channel when training"; asgrad used to
train on a batch of 1 and pull the running variance toward 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.nn import SGD, BatchNorm1d, BatchNorm2d, mse_loss
from asgrad.tensor import FeedError, Graph, ShapeError


def test_a_declared_batch_of_one_is_refused_at_the_line_that_builds_it() -> None:
    with pytest.raises(ShapeError, match="more than one value per channel") as info:
        BatchNorm1d(4)(Graph().input("x", (1, 4)))
    assert __file__ in str(info.value)


def test_a_fed_batch_of_one_is_refused_and_the_running_statistics_keep_their_values() -> None:
    bn = BatchNorm1d(3, dtype="float64")
    g = Graph()
    x = g.input("x", (4, 3), "float64")
    y = g.input("y", (4, 3), "float64")
    step = SGD(bn.parameters(), lr=0.1).compile(mse_loss(bn(x), y))
    rng = np.random.default_rng(0)
    step(x=rng.normal(size=(4, 3)), y=np.zeros((4, 3)))  # type: ignore[operator]
    mean, var = bn.running_mean.value.copy(), bn.running_var.value.copy()
    with pytest.raises(FeedError, match=r"batch_norm \(made at .*float64\[1, 3\] has 1"):
        step(x=rng.normal(size=(1, 3)), y=np.zeros((1, 3)))  # type: ignore[operator]
    np.testing.assert_array_equal(bn.running_mean.value, mean)
    np.testing.assert_array_equal(bn.running_var.value, var)
    step(x=rng.normal(size=(2, 3)), y=np.zeros((2, 3)))  # type: ignore[operator]  # two is fine


def test_one_image_with_many_pixels_per_channel_trains() -> None:
    bn = BatchNorm2d(2)
    out = bn(Graph().input("x", (1, 2, 3, 3)))
    assert out.shape == (1, 2, 3, 3)


def test_evaluation_mode_accepts_a_batch_of_one() -> None:
    bn = BatchNorm1d(4).eval()
    assert bn(Graph().input("x", (1, 4))).shape == (1, 4)
