"""rand / randn / bernoulli / normal in graphs: distribution, seeds, streams, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asgrad.tensor import (
    ArgumentError,
    ArgumentTypeError,
    DTypeError,
    Graph,
    Variable,
    bernoulli,
    compile,
    normal,
    rand,
    rand_like,
    randn,
    randn_like,
    seed_stream,
)
from asgrad.tensor.api.nn_functional import dropout
from asgrad.tensor.ops.random import dropout_keep, normal_from_seed, uniform_from_seed


def _run(outs: list, g: Graph, **feed: np.ndarray) -> list[np.ndarray]:
    return compile(outs, g.updates)(**feed)


def test_uniform_moments_and_range() -> None:
    u = uniform_from_seed((200_000,), 11)
    assert u.min() >= 0.0
    assert u.max() < 1.0
    assert abs(u.mean() - 0.5) < 3e-3  # sd of the mean: 0.29 / sqrt(2e5) = 6.5e-4
    assert abs(u.var() - 1 / 12) < 1e-3
    # every value is k * 2**-24: exact in float32
    assert np.array_equal(u, u.astype(np.float32).astype(np.float64))


def test_normal_matches_the_normal_cdf() -> None:
    z = normal_from_seed((200_000,), 5)
    assert abs(z.mean()) < 0.01
    assert abs(z.std() - 1.0) < 0.01
    assert np.abs(z).max() < math.sqrt(2 * math.log(2**24))
    for q in (-2.0, -1.0, -0.3, 0.0, 0.5, 1.5, 2.5):
        cdf = 0.5 * (1.0 + math.erf(q / math.sqrt(2.0)))
        assert abs((z <= q).mean() - cdf) < 4e-3, q
    # neighbours are uncorrelated, and so are the draws of consecutive seeds
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.01
    assert abs(np.corrcoef(z, normal_from_seed((200_000,), 6))[0, 1]) < 0.01


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shape_dtype_and_int_seed_is_constant(dtype: str) -> None:
    g = Graph()
    a, b = rand(g, 3, 4, seed=3, dtype=dtype), randn(g, (2, 5), seed=3, dtype=dtype)
    assert (a.shape, a.dtype, b.shape, b.dtype) == ((3, 4), dtype, (2, 5), dtype)
    program = compile([a, b])
    first, second = program(), program()
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[0], uniform_from_seed((3, 4), 3).astype(dtype))
    np.testing.assert_array_equal(first[1], normal_from_seed((2, 5), 3).astype(dtype))


def test_like_follows_a_fed_batch_and_element_i_depends_on_the_index_only() -> None:
    g = Graph()
    x = g.input("x", (2, 3))  # the leading axis is free
    program = compile([randn_like(x, seed=9)])
    small = program(x=np.ones((2, 3), np.float32))[0]
    big = program(x=np.ones((7, 3), np.float32))[0]
    assert big.shape == (7, 3)
    np.testing.assert_array_equal(small, big[:2])


def test_default_stream_draws_afresh_every_run_and_every_call() -> None:
    g = Graph()
    x = g.input("x", (64,))
    a, b = rand_like(x), rand_like(x)
    program = compile([a, b], g.updates)
    feed = np.zeros(64, np.float32)
    r1, r2 = program(x=feed), program(x=feed)
    assert not np.array_equal(r1[0], r1[1])  # two draws in one graph
    assert not np.array_equal(r1[0], r2[0])  # two runs
    # The stream holds seeds s, s + 1 in a run and moves on by two: run 2 draws s + 2, s + 3.
    stream = seed_stream(g)
    start = int(stream.value) - 4
    for i, got in enumerate([*r1, *r2]):
        np.testing.assert_array_equal(got, uniform_from_seed((64,), start + i).astype(np.float32))


def test_seed_stream_sets_a_reproducible_start() -> None:
    draws = []
    for _ in range(2):
        g = Graph()
        seed_stream(g, 1234)
        draws.append(_run([randn(g, 10)], g)[0])
    np.testing.assert_array_equal(draws[0], draws[1])
    np.testing.assert_array_equal(draws[0], normal_from_seed((10,), 1234).astype(np.float32))


def test_variable_stream_and_fed_seed() -> None:
    g = Graph()
    var = Variable("noise_seed", np.array(40, np.int64), trainable=False)
    s = g.input("s", (), "int64")
    program = compile([rand(g, 5, seed=var), rand(g, 5, seed=s)], g.updates)
    got = program(s=np.array(40))
    np.testing.assert_array_equal(got[0], got[1])
    assert int(var.value) == 41


def test_samples_are_unrelated_to_a_dropout_mask_of_the_same_seed() -> None:
    keep = dropout_keep((100_000,), 77, 0.5)
    u = uniform_from_seed((100_000,), 77)
    assert abs(np.corrcoef(keep, u)[0, 1]) < 0.01
    g = Graph()
    x = g.input("x", (4,))
    assert dropout(x, 0.5, 3).op == "dropout"  # the dropout op is untouched


def test_bernoulli_and_normal() -> None:
    g = Graph()
    p = g.input("p", (4, 50_000))
    mean, std = g.input("mean", (3,)), g.input("std", (3,))
    outs = [bernoulli(p, seed=1), normal(mean, std, seed=2), normal(mean, 0.0, seed=2)]
    probs = np.array([[0.0], [0.2], [0.7], [1.0]], np.float32) * np.ones((4, 50_000), np.float32)
    m, s = np.array([1.0, -2.0, 0.0], np.float32), np.array([0.5, 2.0, 1.0], np.float32)
    b, n, n0 = compile(outs)(p=probs, mean=m, std=s)
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert b.dtype == np.float32
    np.testing.assert_allclose(b.mean(axis=1), [0.0, 0.2, 0.7, 1.0], atol=6e-3)
    np.testing.assert_allclose(n, m + s * normal_from_seed((3,), 2), rtol=1e-6)
    np.testing.assert_array_equal(n0, m)


def test_bad_arguments_raise_typed_errors() -> None:
    g = Graph()
    x = g.input("x", (3,))
    with pytest.raises(DTypeError, match="int32/int64 scalar"):
        rand_like(x, seed=g.input("s", (), "float32"))
    with pytest.raises(DTypeError, match="int scalar"):
        randn_like(x, seed=Variable("v", np.zeros(2, np.int64), trainable=False))
    with pytest.raises(ArgumentTypeError, match="seed must be"):
        rand_like(x, seed=1.5)  # type: ignore[arg-type]  # the error under test
    with pytest.raises(DTypeError, match="floating point"):
        rand(g, 3, dtype="int32")
    with pytest.raises(DTypeError, match="float"):
        randn_like(g.input("i", (3,), "int32"), seed=1)
    with pytest.raises(ArgumentTypeError, match="must be the Graph"):
        randn(3, 4)  # type: ignore[arg-type]  # the error under test
    with pytest.raises(ArgumentError, match="std must be >= 0"):
        normal(x, -1.0)
