"""Transforms: values, fitting, dtypes and errors."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.nn.data import (
    Clip,
    Compose,
    DataError,
    DataLoader,
    Flatten,
    Log,
    MapDataset,
    MinMaxScale,
    Normalize,
    OneHot,
    RandomNoise,
    StandardScale,
    TensorDataset,
)


def test_normalize_values_and_dtype() -> None:
    x = np.array([[1.0, 4.0], [3.0, 8.0]], dtype=np.float32)
    out = Normalize(mean=[2.0, 6.0], std=[1.0, 2.0])(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[-1.0, -1.0], [1.0, 1.0]])
    assert Normalize(0, 1)(np.array([1, 2])).dtype == np.float32  # ints become float32
    with pytest.raises(DataError, match="positive"):
        Normalize(0.0, 0.0)


def test_standard_scale_fits_on_train_only() -> None:
    rng = np.random.default_rng(0)
    train = rng.normal(5.0, 3.0, size=(1000, 3))
    test = rng.normal(5.0, 3.0, size=(10, 3))
    scale = StandardScale().fit(train)
    z = scale(train)
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1.0, atol=1e-12)
    # The test split uses the train statistics (hand-computed).
    expected = (test - train.mean(axis=0)) / train.std(axis=0)
    np.testing.assert_allclose(scale(test), expected)
    np.testing.assert_allclose(scale.inverse(scale(test)), test)


def test_standard_scale_constant_feature_and_unfitted() -> None:
    x = np.array([[1.0, 7.0], [3.0, 7.0]])
    np.testing.assert_allclose(StandardScale().fit_transform(x), [[-1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(DataError, match="fit"):
        StandardScale()(x)


def test_minmax_scale() -> None:
    train = np.array([[0.0, 10.0], [10.0, 10.0], [5.0, 10.0]])
    s = MinMaxScale((-1.0, 1.0)).fit(train)
    np.testing.assert_allclose(s(train), [[-1.0, -1.0], [1.0, -1.0], [0.0, -1.0]])
    np.testing.assert_allclose(s(np.array([[20.0, 10.0]])), [[3.0, -1.0]])  # extrapolates
    with pytest.raises(DataError, match="low < high"):
        MinMaxScale((1.0, 0.0))
    with pytest.raises(DataError, match="fit"):
        MinMaxScale()(train)


def test_one_hot() -> None:
    out = OneHot(4)(np.array([[1, 3], [0, 0]]))
    assert out.shape == (2, 2, 4)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.argmax(-1), [[1, 3], [0, 0]])
    np.testing.assert_array_equal(OneHot(2)(np.array([1.0])), [[0.0, 1.0]])
    with pytest.raises(DataError, match=r"\[0, 3\)"):
        OneHot(3)(np.array([3]))
    with pytest.raises(DataError, match="integers"):
        OneHot(3)(np.array([0.5]))


def test_flatten() -> None:
    assert Flatten()(np.zeros((2, 3, 4))).shape == (24,)
    assert Flatten(start_axis=1)(np.zeros((2, 3, 4))).shape == (2, 12)
    with pytest.raises(DataError):
        Flatten(start_axis=4)(np.zeros((2, 3)))


def test_random_noise_statistics_and_seed() -> None:
    x = np.zeros(100_000, dtype=np.float32)
    noisy = RandomNoise(0.5, seed=1)(x)
    assert noisy.dtype == np.float32
    assert abs(float(noisy.mean())) < 0.01
    assert abs(float(noisy.std()) - 0.5) < 0.01
    np.testing.assert_array_equal(noisy, RandomNoise(0.5, seed=1)(x))
    t = RandomNoise(0.5, seed=1)
    assert not np.array_equal(t(x), t(x))  # fresh noise every call


def test_clip_and_log() -> None:
    np.testing.assert_array_equal(Clip(-1, 1)(np.array([-5, 0, 5])), [-1, 0, 1])
    np.testing.assert_array_equal(Clip(max=0.0)(np.array([-1.0, 1.0])), [-1.0, 0.0])
    with pytest.raises(DataError):
        Clip(2, 1)
    np.testing.assert_allclose(Log()(np.array([0.0, 1.0])), [0.0, np.log(2.0)])
    np.testing.assert_allclose(Log("log", eps=1e-3)(np.array([0.0])), [np.log(1e-3)])
    with pytest.raises(DataError, match="greater than -1"):
        Log()(np.array([-2.0]))
    with pytest.raises(DataError, match="eps"):
        Log("log")(np.array([-1.0]))


def test_compose_fits_in_sequence() -> None:
    train = np.array([[1.0, 100.0], [3.0, 300.0]])
    pipe = Compose([Log(), StandardScale(), Clip(-0.5, 0.5)]).fit(train)
    out = pipe(train)
    np.testing.assert_allclose(out, [[-0.5, -0.5], [0.5, 0.5]])
    assert "StandardScale" in repr(pipe.transforms[1])


def test_transform_in_a_map_dataset_pipeline() -> None:
    x = np.arange(12.0).reshape(6, 2)
    scale = StandardScale().fit(x)
    ds = MapDataset(TensorDataset(x, np.arange(6) % 3), OneHot(3), columns=(1,))
    ds = MapDataset(ds, scale, columns=(0,), batched=True)
    xb, yb = next(iter(DataLoader(ds, batch_size=6)))
    np.testing.assert_allclose(xb, scale(x))
    assert yb.shape == (6, 3)
