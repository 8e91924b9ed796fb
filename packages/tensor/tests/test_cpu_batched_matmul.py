"""Batched matrix products with the batch over threads (`asgrad.tensor.cpu.jit.batched_matmul`).

Each thread calls ``np.matmul`` on its run of matrices with BLAS on one thread, so the
route gives ``np.matmul``'s bits (float32 and float64, transposed and strided operands,
broadcast batches, odd sizes); the compiled path's lines call it for products of two
stacks only; which form runs follows the kernel thread settings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.cpu.jit import batched_matmul as bm
from asgrad.tensor.cpu.jit import route, threads
from asgrad.tensor.ir.registry import TensorType

numba = pytest.importorskip("numba")
# Tests that run the batch over Numba's thread count or set it: at least two threads.
two_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="Numba starts one thread here"
)


@pytest.fixture(autouse=True)
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty cache folder, no thread or route settings, no decisions; small results
    may take the threads (`threads.PARALLEL_MIN`)."""
    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.delenv(route.ENV, raising=False)
    monkeypatch.setattr(threads, "ROUTE", route.Route("threads"))
    monkeypatch.setattr(bm, "_sites", {})
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    threads.new_step()
    yield
    bm.FORCE[0] = None
    threads.set_threads(None)
    jit.set_enabled(None)
    threads.new_step()


def _heads(rng: np.random.Generator, b: int, t: int, h: int, d: int, dtype: str) -> np.ndarray:
    """(b, h, t, d) as the attention has it: a strided view of a (b, t, h * d) array."""
    x = rng.standard_normal((b, t, h * d)).astype(dtype)
    return x.reshape(b, t, h, d).transpose(0, 2, 1, 3)


def _operands(kind: str, dtype: str, t: int = 13, d: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    b, h = 3, 5  # 15 matrices: an odd count over any thread count
    q, k = _heads(rng, b, t, h, d, dtype), _heads(rng, b, t, h, d, dtype)
    p = rng.standard_normal((b, h, t, t)).astype(dtype)
    if kind == "q @ k^T":
        return q, k.swapaxes(-1, -2)
    if kind == "p @ v":
        return p, k
    if kind == "p^T @ q":
        return p.swapaxes(-1, -2), q
    if kind == "every other matrix":
        return p[:, ::2], p[:, ::2, ::-1].copy()[:, :, :, 1:]
    if kind == "broadcast batch":
        return q, rng.standard_normal((1, h, d, t + 4)).astype(dtype)
    assert kind == "matrix against a stack"
    return rng.standard_normal((t - 2, t)).astype(dtype), p


KINDS = [
    "q @ k^T",
    "p @ v",
    "p^T @ q",
    "every other matrix",
    "broadcast batch",
    "matrix against a stack",
]
# Sizes of the small products (the pool only) and of products above
# `bm.BATCH_MIN_MNK` (one gemm_batch call where numpy's OpenBLAS has it).
SMALL, LARGE = (13, 7), (120, 110)


def _result_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
    return (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])


def _one_blas_thread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul`` with BLAS on one thread: each matrix's product as the routes make it
    (an OpenBLAS may round its threaded products differently: with OPENBLAS_CORETYPE
    set to Haswell on an AMD CPU, for one)."""
    control = bm.blas_control()
    assert control.get is not None
    assert control.set is not None
    before = control.get()
    control.set(1)
    try:
        return np.matmul(a, b)
    finally:
        control.set(before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [2, 4, 15])
def test_the_pool_gives_the_bits_of_np_matmul_on_one_blas_thread(
    kind: str, dtype: str, n: int
) -> None:
    for size in (SMALL, LARGE):
        a, b = _operands(kind, dtype, *size)
        out = np.full(
            _result_shape(a, b),
            np.nan,
            dtype,
        )
        assert bm.pool_products(a, b, out, n)
        np.testing.assert_array_equal(out, _one_blas_thread(a, b), strict=True)
        # np.matmul's threads may round differently: within the op's float tolerance.
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol * np.abs(out).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_batch_gives_the_bits_of_np_matmul_on_one_blas_thread(kind: str, dtype: str) -> None:
    a, b = _operands(kind, dtype, *LARGE)
    expected = _one_blas_thread(a, b)
    out = np.full_like(expected, np.nan)
    assert bm.gemm_batch(a, b, out)
    np.testing.assert_array_equal(out, expected, strict=True)


def test_numpys_openblas_has_gemm_batch_here() -> None:
    # numpy's wheels ship OpenBLAS 0.3.30 or later (numpy 2.3 on), with cblas_?gemm_batch.
    assert set(bm.blas_control().batch) == {"f", "d"}


@pytest.mark.parametrize(
    "case",
    ["small", "a matrix times its transpose", "a dimension of 1", "no BLAS layout", "mixed"],
)
def test_gemm_batch_declines_what_numpy_multiplies_otherwise(case: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 120, 110)).astype(np.float32)
    a, b = x, rng.standard_normal((4, 110, 120)).astype(np.float32)
    if case == "small":
        a, b = a[:, :90, :90], b[:, :90, :90]  # 90**3 multiply-adds
    elif case == "a matrix times its transpose":
        b = x.swapaxes(-1, -2)  # numpy's syrk
    elif case == "a dimension of 1":
        a = a[:, :1]
    elif case == "no BLAS layout":
        a = a[:, :, ::2]
        b = b[:, :55]
    else:
        b = b.astype(np.float64)
    out = np.full(
        _result_shape(a, b),
        np.nan,
        np.float32,
    )
    assert not bm.gemm_batch(a, b, out)
    assert np.isnan(out).all()


def test_numpys_blas_threads_are_reachable_and_restored_after_a_call() -> None:
    control = bm.blas_control()
    assert control.get is not None
    assert control.set is not None
    before = control.get()
    a, b = _operands("p @ v", "float32")
    assert bm.pool_products(a, b, np.matmul(a, b), 2)
    assert control.get() == before


@pytest.mark.parametrize("batch", [(7,), (4, 8), (3, 1, 5), (2, 3, 4)])
def test_pieces_select_each_run_of_matrices_once_in_order(batch: tuple[int, ...]) -> None:
    total = math.prod(batch)
    flat = np.arange(total).reshape(batch)
    for n in (1, 2, 3, 5, total, total + 3):
        covered: list[int] = []
        for i in range(n):
            lo, hi = total * i // n, total * (i + 1) // n
            run = [int(x) for index in bm.pieces(batch, lo, hi) for x in flat[index].ravel()]
            assert run == list(range(lo, hi))
            covered += run
        assert covered == list(range(total))


def test_a_workers_error_is_raised_in_the_caller() -> None:
    pool = bm.Pool(3)

    def job(i: int) -> None:
        if i == 2:
            raise ValueError("job 2")

    with pytest.raises(ValueError, match="job 2"):
        pool.run(job, [(0,), (1,), (2,)])
    pool.run(job, [(0,), (1,)])  # the pool still works
    pool.close()


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread counts `over_threads` is called with from now on."""
    seen: list[int] = []
    real = bm.over_threads

    def spy(a: Any, b: Any, out: Any, n: int) -> bool:
        seen.append(n)
        return real(a, b, out, n)

    monkeypatch.setattr(bm, "over_threads", spy)
    return seen


@two_threads
def test_set_threads_runs_the_batch_over_them_and_one_thread_runs_np_matmul(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = _operands("q @ k^T", "float32")
    seen = _calls(monkeypatch)
    threads.set_threads(2)
    np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
    assert seen == [2]
    threads.set_threads(1)
    np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
    assert seen == [2]


@two_threads
def test_a_product_whose_threads_round_differently_stays_np_matmul(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = _operands("q @ k^T", "float64")
    calls: list[int] = []

    def off_by_one(a: Any, b: Any, out: Any, n: int) -> bool:
        calls.append(n)
        np.matmul(a, b, out=out)
        out += 1.0
        return True

    monkeypatch.setattr(bm, "over_threads", off_by_one)
    threads.set_threads(2)
    for _ in range(3):
        np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b), strict=True)
    assert calls == [2]  # the first call compares, then np.matmul only


def test_a_batch_smaller_than_the_threads_runs_np_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1, 3, 40, 9)), rng.standard_normal((1, 3, 9, 30))
    seen = _calls(monkeypatch)
    monkeypatch.setattr(threads, "threads", lambda: 4)
    monkeypatch.setattr(threads.Site, "form", lambda self, size: threads.PARALLEL)
    out = np.empty((1, 3, 40, 30))
    assert bm.batched_matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))
    assert seen == []


@two_threads
def test_unset_it_runs_np_matmul_in_the_first_step_then_measures_and_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "MEASURE_MIN_THREADS", 2)
    monkeypatch.setattr(threads, "SERIAL_FLOOR", 0.0)
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        threads.new_step()
        a, b = _operands("p @ v", "float32")
        seen = _calls(monkeypatch)
        for _ in range(3):
            bm.batched_matmul(a, b)
        assert seen == []  # the first step: np.matmul
        threads.new_step()
        calls = threads.PROBES + 1 + 2 * threads.SAMPLES
        for _ in range(calls):
            np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
        assert seen == [2] * (1 + threads.SAMPLES)  # the warm-up, then half the samples
        (site,) = bm._sites.values()
        assert site.key(math.prod(np.matmul(a, b).shape), 2) in threads.ROUTE.chosen
    finally:
        numba.set_num_threads(before)


def _attention(on: bool, dtype: str) -> tuple[list[np.ndarray], str]:
    """q @ k^T, p @ v and their transposed gradients' products, compiled, and the
    generated source."""
    jit.set_enabled(on)
    rng = np.random.default_rng(0)
    b, t, h, d = 2, 12, 3, 5
    g = Graph()
    x = g.input("x", (b, t, h * d), dtype)
    p = g.input("p", (b, h, t, t), dtype)
    w = g.input("w", (h * d, 6), dtype)
    q = x.reshape(b, t, h, d).transpose(0, 2, 1, 3)
    outs = [q @ q.swapaxes(-1, -2), p @ q, p.swapaxes(-1, -2) @ q, x @ w]
    program = compile(outs)
    feeds = {
        "x": rng.standard_normal((b, t, h * d)).astype(dtype),
        "p": rng.standard_normal((b, h, t, t)).astype(dtype),
        "w": rng.standard_normal((h * d, 6)).astype(dtype),
    }
    got = [np.asarray(o) for o in program(feeds)]
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    return got, fn.source


@two_threads
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_compiled_lines_call_it_for_stacks_only_and_match_the_numpy_path(dtype: str) -> None:
    threads.set_threads(2)
    bm.FORCE[0] = "parallel"
    compiled, source = _attention(True, dtype)
    reference, plain = _attention(False, dtype)
    assert source.count("_batched_matmul(") == 3  # not the stack against a matrix
    assert "_batched_matmul" not in plain
    for got, want in zip(compiled, reference, strict=True):
        np.testing.assert_array_equal(got, want, strict=True)


def test_eligible_products_are_float_stacks_of_two_matrices_or_more() -> None:
    def t(*shape: int, dtype: str = "float32") -> TensorType:
        return TensorType(shape, dtype)

    assert bm.eligible([t(2, 4, 5), t(2, 5, 3)], t(2, 4, 3))
    assert bm.eligible([t(2, 3, 4, 5), t(1, 3, 5, 3)], t(2, 3, 4, 3))
    assert not bm.eligible([t(1, 4, 5), t(1, 5, 3)], t(1, 4, 3))  # one matrix
    assert not bm.eligible([t(2, 4, 5), t(5, 3)], t(2, 4, 3))  # a stack against a matrix
    assert not bm.eligible([t(2, 0, 5), t(2, 5, 3)], t(2, 0, 3))  # empty
    half = [t(2, 4, 5, dtype="float16"), t(2, 5, 3, dtype="float16")]
    assert not bm.eligible(half, t(2, 4, 3, dtype="float16"))
    ints = [t(2, 4, 5, dtype="int64"), t(2, 5, 3, dtype="int64")]
    assert not bm.eligible(ints, t(2, 4, 3, dtype="int64"))
