"""The parallel forms of the compiled elementwise loops and row kernels
(:mod:`asgrad.tensor.cpu.jit.threads`): bit-identical to the serial forms, fresh and
written over an input, and the thread switch.

The threshold is lowered to one element here so that small arrays take the parallel
form (``parallel=True`` compiles slowly: few kernels, each once).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import ArgumentError, Graph, get_op
from asgrad.tensor.cpu.jit import threads
from asgrad.tensor.cpu.lowering import resolve
from asgrad.tensor.ir.registry import TensorType

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    before = numba.get_num_threads()
    yield
    threads.set_threads(None)
    numba.set_num_threads(before)
    threads.new_step()  # the settings are read again


def _kernel(name: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> tuple[Any, int]:
    """The compiled kernel the op's lowering picks at these arrays' types, and how many
    leading inputs it may be written over."""
    types = [TensorType(a.shape, a.dtype.name) for a in arrays]
    g = Graph()
    node = g.apply(name, [g.input(f"x{i}", t.shape, t.dtype) for i, t in enumerate(types)], attrs)
    choose = resolve(get_op(name)).compiled
    assert choose is not None
    entry = choose(node.node, types, node.node.type)
    assert entry is not None
    assert entry.source is not None
    return entry.load(), entry.leading


def _module(fn: Any) -> ModuleType:
    return sys.modules[fn.__module__]


def _both(
    name: str, arrays: list[np.ndarray], attrs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every form the kernel has (fresh, over each input it may be written over): the
    parallel result equals the serial one bit for bit, and the parallel form ran."""
    fn, leading = _kernel(name, arrays, attrs)
    threads.set_threads(1)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    serial = [fn(*arrays, **attrs)]
    for j in range(leading):
        given = [a.copy() for a in arrays]
        serial.append(fn(*given, out=given[j], **attrs))
    threads.set_threads(2)
    parallel = [fn(*arrays, **attrs)]
    for j in range(leading):
        given = [a.copy() for a in arrays]
        got = fn(*given, out=given[j], **attrs)
        assert got is given[j]
        parallel.append(got)
    for s, p in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(p, s)
        assert p.tobytes() == s.tobytes()  # bit for bit, NaN payloads and signed zeros too
    module = _module(fn)
    ran = [k for k in vars(module) if k.startswith("_p_") and getattr(module, k).signatures]
    assert ran, "the parallel form never ran"


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("size", [1, 7, 2 * threads.CHUNK + 5])
def test_a_parallel_elementwise_loop_is_bit_identical_to_the_serial_one(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(0)
    x, g = _f32(rng, size), _f32(rng, size)
    x[::5] = np.nan
    _both("gelu_backward", [g, x], {"approximate": "none"}, monkeypatch)


def test_a_parallel_elementwise_loop_of_non_contiguous_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    x, g = _f32(rng, 40, 30).T, _f32(rng, 80, 30)[::2].T
    _both("gelu_backward", [g, x], {"approximate": "none"}, monkeypatch)


def test_a_parallel_elementwise_loop_with_scalar_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    p, m, v = _f32(rng, 33), _f32(rng, 33), np.abs(_f32(rng, 33))
    lr, scale = np.asarray(1e-3, np.float32), np.asarray(0.5, np.float32)
    _both("adam_update", [p, m, v, lr, scale], {"eps": 1e-8}, monkeypatch)


def _choose(name: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> Any:
    types = [TensorType(a.shape, a.dtype.name) for a in arrays]
    g = Graph()
    node = g.apply(name, [g.input(f"x{i}", t.shape, t.dtype) for i, t in enumerate(types)], attrs)
    choose = resolve(get_op(name)).compiled
    assert choose is not None
    return choose(node.node, types, node.node.type)


def test_a_one_primitive_loop_is_compiled_only_where_it_runs_over_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    x, y = _f32(rng, 40, 9), _f32(rng, 40, 9)
    threads.set_threads(1)
    assert _choose("add", [x, y], {}) is None  # numpy's own loop, as fast on one thread
    threads.set_threads(2)
    assert _choose("add", [x, y], {}) is None  # below the threshold: one thread again
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    assert _choose("add", [x, y], {}) is not None
    _both("mul", [x, y], {}, monkeypatch)
    np.testing.assert_array_equal(_kernel("mul", [x, y], {})[0](x, y), x * y)


@pytest.mark.parametrize("bias_first", [False, True])
def test_a_loop_over_threads_takes_an_input_repeated_along_the_rows(
    bias_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(6)
    x, bias = _f32(rng, 3 * threads.CHUNK // 9 + 5, 3, 9), _f32(rng, 3, 9)
    x[1, 2, 3] = np.nan
    arrays = [bias, x] if bias_first else [x, bias]
    threads.set_threads(1)
    assert _choose("add", arrays, {}) is None
    threads.set_threads(2)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    fn, leading = _kernel("add", arrays, {})
    assert leading == (0 if bias_first else 1)  # only x may be written over
    _both("add", arrays, {}, monkeypatch)
    want = np.add(*arrays)
    assert fn(*arrays).tobytes() == want.tobytes()
    if not bias_first:
        given = x.copy()
        assert fn(given, bias, out=given).tobytes() == want.tobytes()
    # Leading ones aside, a trailing part: [1, 3, 9] repeated along [n, 3, 9]'s rows.
    lead = bias.reshape(1, 3, 9)
    fn, _ = _kernel("add", [x, lead], {})
    assert fn(x, lead).tobytes() == np.add(x, lead).tobytes()
    # A shape that is not a trailing part of the result's: numpy's broadcasting stays.
    assert _choose("add", [_f32(rng, 4, 1), _f32(rng, 4, 5)], {}) is None


@pytest.mark.parametrize("shape", [(2, 9), (37, 9), (5, 3, 16)])
def test_parallel_row_kernels_are_bit_identical_to_the_serial_ones(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    x = _f32(rng, *shape)
    x.reshape(-1)[3] = np.nan  # one row NaN; the others not
    _both("softmax", [x], {"axis": -1}, monkeypatch)
    n = shape[-1]
    ln = {"normalized_shape": (n,), "eps": 1e-5}
    _both("layer_norm_backward", [_f32(rng, *shape), x, _f32(rng, n)], ln, monkeypatch)


def test_parallel_slab_kernels_are_bit_identical_to_the_serial_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    x = _f32(rng, 7, 5, 11)
    x[2, 1, 4] = np.nan
    _both("softmax", [x], {"axis": 1}, monkeypatch)
    _both("softmax", [np.asfortranarray(x)], {"axis": 1}, monkeypatch)


def test_the_kernel_threads_follow_numba_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(threads.ENV, raising=False)
    numba.set_num_threads(2)
    assert threads.threads() == 2
    numba.set_num_threads(1)
    assert threads.threads() == 1
    monkeypatch.setenv(threads.ENV, "2")
    assert threads.threads() == 2
    threads.set_threads(1)
    assert threads.threads() == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, 10**6])
def test_a_bad_thread_count_is_refused(bad: Any) -> None:
    with pytest.raises(ArgumentError, match="kernel threads"):
        threads.set_threads(bad)


@pytest.mark.parametrize("bad", ["0", "two"])
def test_a_bad_asgrad_cpu_threads_is_refused(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(threads.ENV, bad)
    with pytest.raises(ArgumentError, match=threads.ENV):
        threads.threads()


def test_numba_is_prepared_with_openmp_threads_that_wait_passively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asgrad.tensor.cpu.jit import prepare_numba

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    prepare_numba()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    prepare_numba()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # a user's choice stays
