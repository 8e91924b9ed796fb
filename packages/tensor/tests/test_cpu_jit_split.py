"""Batched products, copies and sums split over threads (asgrad.tensor.cpu.jit.split):
the same results as numpy, BLAS's thread count restored, and the compiled path's lines
calling them only for large work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu import CPUExecutable, blas
from asgrad.tensor.cpu.jit import split, threads

numba = pytest.importorskip("numba")
if numba.config.NUMBA_NUM_THREADS < 2:
    pytest.skip("Numba runs one thread here: nothing to split", allow_module_level=True)


@pytest.fixture(autouse=True)
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Two kernel threads, every size split; yields the shares of each split run."""
    monkeypatch.setattr(split, "MATMUL_MIN_FLOPS", 1)
    monkeypatch.setattr(split, "COPY_MIN_ELEMENTS", 1)
    monkeypatch.setattr(split, "SUM_MIN_ELEMENTS", 1)
    runs: list[int] = []
    run = split._run

    def counted(shares: list[tuple[Any, ...]], job: Any, n: int) -> None:
        runs.append(len(shares))
        run(shares, job, n)

    monkeypatch.setattr(split, "_run", counted)
    threads.set_threads(2)
    yield runs
    threads.set_threads(None)


def _reachable() -> bool:
    return blas.blas_threads().set is not None


def _blas_count() -> Any:
    get = blas.blas_threads().get
    return None if get is None else get()


def _heads(rng: np.random.Generator, b: int, h: int, t: int, d: int) -> tuple[Any, Any]:
    """Attention's query and transposed key: strided views of one projection."""
    qkv = rng.standard_normal((b, t, 2 * h * d)).astype(np.float32)
    q = qkv[:, :, : h * d].reshape(b, t, h, d).transpose(0, 2, 1, 3)
    kt = qkv[:, :, h * d :].reshape(b, t, h, d).transpose(0, 2, 3, 1)
    return q, kt


@pytest.mark.parametrize("batch", [(5, 3), (1, 6), (3,)])
def test_a_split_product_equals_numpys_and_restores_blas_threads(
    two_threads: list[int], batch: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch, 7, 9)).astype(np.float32)
    b = rng.standard_normal((*batch, 9, 4)).astype(np.float32)
    before = _blas_count()
    out = split.split_matmul(a, b)
    np.testing.assert_array_equal(out, np.matmul(a, b))
    if _reachable():
        assert two_threads == [2]
        assert _blas_count() == before


def test_strided_and_broadcast_operands_split_into_out() -> None:
    rng = np.random.default_rng(1)
    q, kt = _heads(rng, 4, 3, 8, 5)
    out = np.full((4, 3, 8, 8), np.nan, np.float32)
    assert split.split_matmul(q, kt, out=out) is out
    np.testing.assert_array_equal(out, np.matmul(q, kt))
    shared = rng.standard_normal((1, 3, 5, 8)).astype(np.float32)  # broadcast batch
    np.testing.assert_array_equal(split.split_matmul(q, shared), np.matmul(q, shared))


def test_small_or_unbatched_products_are_numpys(two_threads: list[int], monkeypatch: Any) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((6, 7)), rng.standard_normal((7, 3))
    np.testing.assert_array_equal(split.split_matmul(a, b), a @ b)
    monkeypatch.setattr(split, "MATMUL_MIN_FLOPS", 1 << 40)
    a3 = rng.standard_normal((4, 6, 7))
    np.testing.assert_array_equal(split.split_matmul(a3, a3.swapaxes(1, 2)), a3 @ a3.swapaxes(1, 2))
    threads.set_threads(1)
    monkeypatch.setattr(split, "MATMUL_MIN_FLOPS", 1)
    split.split_matmul(a3, a3.swapaxes(1, 2))
    assert two_threads == []


def test_shares_cover_every_matrix_once() -> None:
    for shape, n in (((7, 3), 2), ((2, 9), 4), ((1, 5), 3), ((3,), 8), ((1, 1), 2)):
        seen = np.zeros(shape, int)
        for index in split._shares(shape, n):
            seen[index] += 1
        assert (seen == 1).all(), (shape, n)


def test_a_split_copy_is_exact() -> None:
    rng = np.random.default_rng(3)
    big = np.zeros((4, 6, 30), np.float32)
    target = big[:, :, 10:20].reshape(4, 6, 2, 5)
    src = rng.standard_normal((4, 2, 6, 5)).astype(np.float32).transpose(0, 2, 1, 3)
    split.split_copy(target, src)
    np.testing.assert_array_equal(target, src)
    assert not big[:, :, :10].any()
    assert not big[:, :, 20:].any()


@pytest.mark.parametrize(
    ("shape", "axis", "keep"), [((6, 5, 64), (0, 1), False), ((9, 48), (0,), True)]
)
def test_a_split_sum_has_numpys_bits(
    two_threads: list[int], shape: tuple[int, ...], axis: tuple[int, ...], keep: bool
) -> None:
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32) * 1e3
    got = split.split_add_reduce(x, axis, None, None, keep)
    reduce: Any = np.add.reduce
    want = reduce(x, axis, None, None, keep)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if _reachable():
        assert two_threads == [2]


def test_sums_over_other_axes_are_numpys(two_threads: list[int]) -> None:
    x = np.random.default_rng(5).standard_normal((6, 64, 3)).astype(np.float32)
    np.testing.assert_array_equal(split.split_add_reduce(x, (1,)), np.add.reduce(x, (1,)))
    np.testing.assert_array_equal(split.split_add_reduce(x, (0,)), np.add.reduce(x, (0,)))
    assert two_threads == []  # 3 columns: too few to share


def test_the_compiled_path_calls_the_split_product_for_large_batched_products(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asgrad.tensor.cpu import jit

    rng = np.random.default_rng(6)
    g = Graph()
    a, b = g.input("a", (4, 3, 8, 5)), g.input("b", (4, 3, 5, 6))
    w = g.input("w", (2, 6))
    y = (a @ b).sum() + (w @ w.swapaxes(0, 1)).sum()
    feeds = {
        "a": rng.standard_normal((4, 3, 8, 5)).astype(np.float32),
        "b": rng.standard_normal((4, 3, 5, 6)).astype(np.float32),
        "w": rng.standard_normal((2, 6)).astype(np.float32),
    }
    results, sources = [], []
    for on in (False, True):
        jit.set_enabled(on)
        try:
            program = compile([y])
            results.append(program(feeds)[0])
            assert isinstance(program.executable, CPUExecutable)
            (fn,) = program.executable._fns.values()
            sources.append(fn.source)
        finally:
            jit.set_enabled(None)
    assert "_split_matmul" not in sources[0]
    assert sources[1].count("_split_matmul(") == 1  # the batched product, not w's
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5)


def test_a_split_reshape_views_where_numpy_views_and_copies_exactly_elsewhere() -> None:
    x = np.arange(4 * 3 * 5 * 2, dtype=np.float32).reshape(4, 3, 5, 2)
    view = split.split_reshape(x, (12, 10))
    assert np.shares_memory(view, x)
    heads = x.transpose(0, 2, 1, 3)  # attention's heads joined: a copy
    joined = split.split_reshape(heads, (4, 5, 6))
    assert not np.shares_memory(joined, x)
    np.testing.assert_array_equal(joined, heads.reshape(4, 5, 6))


def test_a_split_while_another_thread_splits_runs_on_its_own_thread() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 3, 6, 5)).astype(np.float32)
    b = rng.standard_normal((4, 3, 5, 2)).astype(np.float32)
    before = _blas_count()
    with split._running:  # another thread's split
        out = split.split_matmul(a, b)
        assert _blas_count() == before
    np.testing.assert_array_equal(out, np.matmul(a, b))
