"""Sums over leading axes on the compiled path (`asgrad.tensor.cpu.jit.kernels_sum`,
`asgrad.tensor.cpu.jit.fuse_sums`), the layer norm's weight gradient in the same
blocks, what the thread choice reports, and OpenBLAS's polling time
(`asgrad.tensor._openblas`).

Both forms of a blocked sum add the same numbers in the same order: the bits are equal
serially, over one thread and over two; numpy's order exactly up to ``ROWS`` rows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from asgrad.tensor import Graph, make_schedule
from asgrad.tensor import _openblas as ob
from asgrad.tensor.cpu.codegen import generate_cpu_function
from asgrad.tensor.cpu.jit import threads

numba = pytest.importorskip("numba")
if numba.config.NUMBA_NUM_THREADS < 2:
    pytest.skip("Numba runs one thread here: nothing to thread", allow_module_level=True)

from asgrad.tensor.cpu.jit import kernels_norm as kn  # noqa: E402  # imports Numba
from asgrad.tensor.cpu.jit import kernels_sum as ks  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh(fresh_choices: Path) -> Iterator[None]:
    before = numba.get_num_threads()
    yield
    ks._site.force = kn._site.force = None
    numba.set_num_threads(before)


def _forms(call: object, site: threads.Site) -> list[bytes]:
    """``call()``'s bytes serially, in parallel over one thread and over two."""
    results = []
    for form, n in (("serial", 2), ("parallel", 1), ("parallel", 2)):
        site.force = form
        numba.set_num_threads(n)
        results.append(np.asarray(call()).tobytes())  # type: ignore[operator]
    site.force = None
    return results


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((1, 5), "float32"),
        ((127, 33), "float32"),
        ((ks.ROWS, 17), "float64"),
        ((ks.ROWS + 1, 3), "float32"),
        ((7, 311, 24), "float32"),  # 2,177 rows: 18 blocks, the last one short
        ((1000, 1), "float64"),
        ((32, 4100), "float32"),  # one block in bands of columns over the threads
        ((2, 100, 2500), "float64"),  # two blocks, three bands each
    ],
)
def test_a_leading_sum_gives_the_same_bits_serially_and_over_any_threads(
    shape: tuple[int, ...], dtype: str
) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype) * 10
    n = shape[-1]
    got = _forms(lambda: ks.leading_sum(x, n), ks._site)
    assert got[0] == got[1] == got[2]
    assert ks._sum_parallel.signatures  # the parallel form ran
    result = np.frombuffer(got[0], dtype)
    numpy_sum = np.add.reduce(x, tuple(range(len(shape) - 1)))
    rows = int(np.prod(shape[:-1]))
    if rows <= ks.ROWS:  # one block: numpy's order
        np.testing.assert_array_equal(result, numpy_sum)
    exact = x.astype(np.float64).reshape(-1, n).sum(0)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(result, exact, rtol=tol, atol=tol * np.abs(x).sum(axis=None) / n)


def test_a_leading_sum_of_a_transposed_array_sums_its_values() -> None:
    x = np.arange(6 * 300, dtype=np.float32).reshape(300, 6).T.reshape(2, 3, 300)
    np.testing.assert_array_equal(ks.leading_sum(x, 300), x.sum((0, 1)))


@pytest.mark.parametrize(("shape", "n"), [((0, 4), 4), ((3, 0), 0)])
def test_a_leading_sum_of_nothing_is_zeros(shape: tuple[int, ...], n: int) -> None:
    got = ks.leading_sum(np.ones(shape, np.float32), n)
    np.testing.assert_array_equal(got, np.zeros(n, np.float32))


def test_the_blocks_depend_on_the_row_count_alone() -> None:
    assert ks.blocks(1) == (ks.ROWS, 1)
    assert ks.blocks(ks.ROWS + 1) == (ks.ROWS, 2)
    per, count = ks.blocks(10**7)
    assert count <= ks.MAX_BLOCKS
    assert per * count >= 10**7 > per * (count - 1)


@pytest.mark.parametrize("rows", [5, ks.ROWS, 3 * ks.ROWS + 2])
def test_the_layer_norm_weight_gradient_gives_the_same_bits_serially_and_over_threads(
    rows: int,
) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, 40)).astype(np.float32)
    g = rng.standard_normal((rows, 40)).astype(np.float32)
    got = _forms(lambda: kn.layer_norm_weight_grad(g, x, eps=1e-5), kn._site)
    assert got[0] == got[1] == got[2]
    assert kn._weight_grad_p.signatures
    x64 = x.astype(np.float64)
    hat = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    want = (g * hat).sum(0)
    np.testing.assert_allclose(np.frombuffer(got[0], np.float32), want, rtol=1e-4, atol=1e-4)


def _bias_gradient(shape: tuple[int, ...]) -> tuple[object, object, dict[str, np.ndarray]]:
    """A function of ``x`` summed over its leading axes to its last, compiled and numpy."""
    x = Graph().input("x", shape, "float32")
    schedule = make_schedule([(x * 2.0).sum(axis=tuple(range(len(shape) - 1)))])
    types = schedule.infer_types({"x": shape})
    feeds = {"x": np.random.default_rng(2).standard_normal(shape).astype(np.float32)}
    compiled = generate_cpu_function(schedule, types, compiled=True)
    return compiled, generate_cpu_function(schedule, types, compiled=False), feeds


def test_a_large_sum_over_leading_axes_runs_the_blocked_kernel_on_the_compiled_path() -> None:
    compiled, reference, feeds = _bias_gradient((4, 64, 256))  # 65,536 elements
    assert "_leading_sum" in compiled.source  # type: ignore[attr-defined]
    got = compiled(feeds)[0]  # type: ignore[operator]
    want = reference(feeds)[0]  # type: ignore[operator]
    assert got.shape == want.shape == (256,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_small_sum_over_leading_axes_stays_numpys() -> None:
    compiled, reference, feeds = _bias_gradient((4, 8, 16))
    assert "_leading_sum" not in compiled.source  # type: ignore[attr-defined]
    np.testing.assert_array_equal(compiled(feeds)[0], reference(feeds)[0])  # type: ignore[operator]


def test_the_report_gives_each_measured_choice_with_its_times() -> None:
    site = threads.Site("reported")
    n = threads._setting()[0]
    key = ("reported", 1 << 20, n)
    site.measured[key] = (2e-3, 1e-3)
    threads.ROUTE.decided(key, "parallel")
    threads.Site("reported")  # the module made again: still one row
    rows = [r for r in threads.report() if r["kernel"] == "reported"]
    assert rows == [
        {
            "kernel": "reported",
            "size": 1 << 20,
            "threads": n,
            "form": "parallel",
            "source": "measured",
            "serial_ms": 2.0,
            "parallel_ms": 1.0,
        }
    ]


@pytest.mark.parametrize(
    ("env", "numpy_loaded", "want"),
    [
        ({"NUMBA_NUM_THREADS": "16"}, False, ob.TIMEOUT),
        ({"NUMBA_NUM_THREADS": "2"}, False, None),  # kernels serial: products keep polling
        ({"ASGRAD_CPU_THREADS": "8", "NUMBA_NUM_THREADS": "2"}, False, ob.TIMEOUT),
        ({"NUMBA_NUM_THREADS": "16", "ASGRAD_CPU_JIT": "0"}, False, None),
        ({"NUMBA_NUM_THREADS": "16", "OPENBLAS_THREAD_TIMEOUT": "28"}, False, "28"),
        ({"NUMBA_NUM_THREADS": "16"}, True, None),  # too late: OpenBLAS read it already
    ],
)
def test_openblas_polls_briefly_where_kernels_may_thread_and_numpy_is_not_loaded(
    env: dict[str, str], numpy_loaded: bool, want: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NUMBA_NUM_THREADS", "ASGRAD_CPU_THREADS", "ASGRAD_CPU_JIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "")  # restored as it was afterwards
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if not numpy_loaded:
        monkeypatch.delitem(sys.modules, "numpy")
    assert ob.configure() is (want == ob.TIMEOUT and "OPENBLAS_THREAD_TIMEOUT" not in env)
    assert ob.os.environ.get("OPENBLAS_THREAD_TIMEOUT") == want


def test_openblas_polls_briefly_from_the_thread_count_kernels_are_measured_at() -> None:
    assert ob.MIN_THREADS == threads.MEASURE_MIN_THREADS
