"""Batched matrix products with each matrix on one of BLAS's threads
(`asgrad.tensor.cpu.jit.batched_matmul`).

One ``cblas_?gemm_batch`` call gives the bits of ``np.matmul`` with BLAS on one thread
(float32 and float64, transposed and strided operands, broadcast batches, odd sizes) and
declines what numpy multiplies another way; the compiled path's lines call it for
products of two stacks above its size only; it runs only where its first call gave
``np.matmul``'s bits; which form runs follows the kernel thread settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.cpu.blas import blas_threads
from asgrad.tensor.cpu.jit import batched_matmul as bm
from asgrad.tensor.cpu.jit import threads
from asgrad.tensor.ir.registry import TensorType

numba = pytest.importorskip("numba")
# Tests that run the batch over Numba's thread count or set it: at least two threads.
two_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="Numba starts one thread here"
)


@pytest.fixture(autouse=True)
def settings(fresh_choices: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty cache folder, no thread or route settings, no decisions."""
    monkeypatch.setattr(bm, "_sites", {})
    monkeypatch.setattr(bm, "_agrees", {})
    yield
    bm.FORCE[0] = None
    threads.set_threads(None)
    jit.set_enabled(None)


def _heads(rng: np.random.Generator, b: int, t: int, h: int, d: int, dtype: str) -> np.ndarray:
    """(b, h, t, d) as the attention has it: a strided view of a (b, t, h * d) array."""
    x = rng.standard_normal((b, t, h * d)).astype(dtype)
    return x.reshape(b, t, h, d).transpose(0, 2, 1, 3)


# Each matrix's product above `bm.BATCH_MIN_MNK` multiply-adds: 120 x 110 x 120.
T, D = 120, 110


def _operands(kind: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    b, h = 3, 5  # 15 matrices: an odd count
    q, k = _heads(rng, b, T, h, D, dtype), _heads(rng, b, T, h, D, dtype)
    p = rng.standard_normal((b, h, T, T)).astype(dtype)
    if kind == "q @ k^T":
        return q, k.swapaxes(-1, -2)
    if kind == "p @ v":
        return p, k
    if kind == "p^T @ q":
        return p.swapaxes(-1, -2), q
    if kind == "every other matrix":
        return p[:, ::2], p[:, ::2, ::-1].copy()[:, :, :, 1:]
    if kind == "broadcast batch":
        return q, rng.standard_normal((1, h, D, T + 4)).astype(dtype)
    assert kind == "matrix against a stack"
    return rng.standard_normal((T - 2, T)).astype(dtype), p


KINDS = [
    "q @ k^T",
    "p @ v",
    "p^T @ q",
    "every other matrix",
    "broadcast batch",
    "matrix against a stack",
]


def _result_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
    return (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])


def _one_blas_thread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul`` with BLAS on one thread: each matrix's product as `gemm_batch`
    makes it (an OpenBLAS may round its threaded products differently: with
    OPENBLAS_CORETYPE set to Haswell on an AMD CPU, for one)."""
    control = blas_threads()
    if control.set is None or control.get is None:
        pytest.skip("threadpoolctl cannot reach numpy's BLAS here")
    before = control.get()
    control.set(1)
    try:
        return np.matmul(a, b)
    finally:
        control.set(before)


def test_numpys_openblas_has_gemm_batch_here() -> None:
    # numpy's wheels ship OpenBLAS 0.3.30 or later (numpy 2.3 on), with cblas_?gemm_batch.
    assert set(bm.blas_batch().fns) == {"f", "d"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_batch_gives_the_bits_of_np_matmul_on_one_blas_thread(kind: str, dtype: str) -> None:
    a, b = _operands(kind, dtype)
    expected = _one_blas_thread(a, b)
    out = np.full_like(expected, np.nan)
    assert bm.gemm_batch(a, b, out)
    np.testing.assert_array_equal(out, expected, strict=True)
    # np.matmul's threads may round differently: within the op's float tolerance.
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol * np.abs(out).max())


@pytest.mark.parametrize(
    "case",
    [
        "small",
        "a matrix times its transpose",
        "a dimension of 1",
        "no BLAS layout",
        "mixed",
        "overlap",
    ],
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
    elif case == "mixed":
        b = b.astype(np.float64)
    out = np.full(_result_shape(a, b), np.nan, np.float32)
    if case == "overlap":
        a = out[:, :, :110]  # the result written over its own operand
    before = out.copy()
    assert not bm.gemm_batch(a, b, out)
    np.testing.assert_array_equal(out, before)


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The result shapes `gemm_batch` is called with from now on."""
    seen: list[tuple[int, ...]] = []
    real = bm.gemm_batch

    def spy(a: Any, b: Any, out: Any) -> bool:
        seen.append(out.shape)
        return real(a, b, out)

    monkeypatch.setattr(bm, "gemm_batch", spy)
    return seen


@two_threads
def test_set_threads_runs_the_batch_over_blas_threads_and_one_thread_runs_np_matmul(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = _operands("q @ k^T", "float64")
    seen = _calls(monkeypatch)
    threads.set_threads(2)
    np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
    np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
    assert len(seen) == 2
    threads.set_threads(1)
    np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b))
    assert len(seen) == 2


@two_threads
def test_a_product_whose_threads_round_differently_stays_np_matmul(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = _operands("q @ k^T", "float64")
    calls: list[int] = []

    def off_by_one(a: Any, b: Any, out: Any) -> bool:
        calls.append(1)
        np.matmul(a, b, out=out)
        out += 1.0
        return True

    monkeypatch.setattr(bm, "gemm_batch", off_by_one)
    threads.set_threads(2)
    for _ in range(3):
        np.testing.assert_array_equal(bm.batched_matmul(a, b), np.matmul(a, b), strict=True)
    assert calls == [1]  # the first call compares, then np.matmul only


def test_a_batch_smaller_than_the_threads_runs_np_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1, 3, 140, 109)), rng.standard_normal((1, 3, 109, 130))
    seen = _calls(monkeypatch)
    monkeypatch.setattr(threads, "threads", lambda: 4)
    monkeypatch.setattr(threads.Site, "form", lambda self, size: threads.PARALLEL)
    out = np.empty((1, 3, 140, 130))
    assert bm.batched_matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))
    assert seen == []


@two_threads
def test_unset_it_runs_np_matmul_in_the_first_step_then_measures_and_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "MEASURE_MIN_THREADS", 2)
    monkeypatch.setattr(threads, "SERIAL_FLOOR", 0.0)
    # every sample of each form, whatever the times (a clear winner may decide after
    # `threads.EARLY` of each: `test_cpu_jit_thread_choice.py` pins that on given times)
    monkeypatch.setattr(threads, "CLEAR", float("inf"))
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        threads.new_step()
        a, b = _operands("p @ v", "float64")
        expected = np.matmul(a, b)
        seen = _calls(monkeypatch)
        for _ in range(3):
            bm.batched_matmul(a, b)
        assert seen == []  # the first step: np.matmul
        threads.new_step()
        for _ in range(threads.PROBES + 1 + 2 * threads.SAMPLES):
            np.testing.assert_array_equal(bm.batched_matmul(a, b), expected, strict=True)
        # the warm-up (which compares the bits), then half the samples
        assert len(seen) == 1 + threads.SAMPLES
        (site,) = bm._sites.values()
        assert site.key(expected.size, 2) in threads.ROUTE.chosen
    finally:
        numba.set_num_threads(before)


def _attention(on: bool, dtype: str) -> tuple[list[np.ndarray], str]:
    """q @ k^T, p @ v and a transposed gradient-like product above `BATCH_MIN_MNK`,
    one below it, and a stack against a matrix, compiled; and the generated source."""
    jit.set_enabled(on)
    rng = np.random.default_rng(0)
    b, t, h, d = 2, T, 3, D
    g = Graph()
    x = g.input("x", (b, t, h * d), dtype)
    p = g.input("p", (b, h, t, t), dtype)
    w = g.input("w", (h * d, 6), dtype)
    q = x.reshape(b, t, h, d).transpose(0, 2, 1, 3)
    small = q[:, :, :, :8] @ p[:, :, :8, :]  # 120 x 8 x 120
    outs = [p @ q, p.swapaxes(-1, -2) @ q, q @ p[:, :, :d, :], small, x @ w]
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
def test_the_compiled_lines_call_it_for_large_stacks_only_and_match_the_numpy_path(
    dtype: str,
) -> None:
    threads.set_threads(2)
    bm.FORCE[0] = "parallel"
    compiled, source = _attention(True, dtype)
    reference, plain = _attention(False, dtype)
    assert source.count("_batched_matmul(") == 3  # not the small one, nor stack @ matrix
    assert "_batched_matmul" not in plain
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(compiled, reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_eligible_products_are_float_stacks_of_two_matrices_or_more_above_the_size() -> None:
    def t(*shape: int, dtype: str = "float32") -> TensorType:
        return TensorType(shape, dtype)

    m, k, n = 120, 110, 120
    assert bm.eligible([t(2, m, k), t(2, k, n)], t(2, m, n))
    assert bm.eligible([t(2, 3, m, k), t(1, 3, k, n)], t(2, 3, m, n))
    assert not bm.eligible([t(1, m, k), t(1, k, n)], t(1, m, n))  # one matrix
    assert not bm.eligible([t(2, m, k), t(k, n)], t(2, m, n))  # a stack against a matrix
    assert not bm.eligible([t(2, 100, 100), t(2, 100, 100)], t(2, 100, 100))  # 100**3
    assert not bm.eligible([t(2, 0, k), t(2, k, n)], t(2, 0, n))  # empty
    half = [t(2, m, k, dtype="float16"), t(2, k, n, dtype="float16")]
    assert not bm.eligible(half, t(2, m, n, dtype="float16"))
    ints = [t(2, m, k, dtype="int64"), t(2, k, n, dtype="int64")]
    assert not bm.eligible(ints, t(2, m, n, dtype="int64"))
