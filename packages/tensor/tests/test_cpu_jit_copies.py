"""A transposed value's reshape on the compiled path (`asgrad.tensor.cpu.jit.fuse_copies`,
`asgrad.tensor.cpu.jit.kernels_copy.reshaped`): numpy's view where it makes one, else a
copy equal to numpy's, serially or over threads."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, make_schedule
from asgrad.tensor.cpu.codegen import generate_cpu_function
from asgrad.tensor.cpu.jit import threads

numba = pytest.importorskip("numba")

from asgrad.tensor.cpu.jit import kernels_copy as kc  # noqa: E402  # imports Numba


@pytest.mark.parametrize("form", ["serial", "parallel"])
def test_a_reshape_numpy_copies_is_the_same_copy_serially_and_over_threads(form: str) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4, 9, 5)).astype(np.float32)
    heads = x.transpose(0, 2, 1, 3)
    kc._site.force = form
    try:
        got = kc.reshaped(heads, (3, 9, 20))
    finally:
        kc._site.force = None
    np.testing.assert_array_equal(got, heads.reshape(3, 9, 20))
    assert got.flags.c_contiguous


def test_a_reshape_numpy_makes_as_a_view_stays_a_view() -> None:
    x = np.zeros((2, 3, 4, 5), np.float32).transpose(0, 2, 1, 3)
    got = kc.reshaped(x, (2, 4, 3, 5, 1))
    assert np.shares_memory(got, x)
    flat = np.zeros((2, 3, 4, 5), np.float32)
    assert np.shares_memory(kc.reshaped(flat, (6, 20)), flat)


def test_a_large_transposed_reshape_is_copied_by_the_kernel_on_the_compiled_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b, h, t, d = 2, 4, 64, 64  # 32,768 elements: PARALLEL_MIN
    x = Graph().input("x", (b, h, t, d), "float32")
    y = x.transpose((0, 2, 1, 3)).reshape((b, t, h * d)) * 2.0
    schedule = make_schedule([y])
    types = schedule.infer_types({"x": (b, h, t, d)})
    feeds = {"x": np.random.default_rng(1).standard_normal((b, h, t, d)).astype(np.float32)}
    compiled = generate_cpu_function(schedule, types, compiled=True)
    assert "_reshaped(" in compiled.source
    want = generate_cpu_function(schedule, types, compiled=False)(feeds)[0]
    np.testing.assert_array_equal(compiled(feeds)[0], want)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 30)  # too small for threads
    small = generate_cpu_function(schedule, types, compiled=True)
    assert "_reshaped(" not in small.source
