"""The ops' float32 paths (``OpDef.into``) against their kernels.

Exact paths (softmax, layer norm and its backward) write into scratch slots or dying
inputs with ``out=`` (and scratch arrays with ``work=``); results must be bit for bit
those of the registered kernels, aliased or not. Inexact paths (erf, GELU) must match
the kernels within the ops' tolerances, and run for float32 only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, all_ops, compile, get_op
from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.ops._erf import erf_f32, gelu_f32


@pytest.fixture(autouse=True)
def _numpy_path() -> Iterator[None]:
    """These tests are about the numpy reference path (the compiled path has its own)."""
    jit.set_enabled(False)
    yield
    jit.set_enabled(None)


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _into(name: str) -> Callable[..., np.ndarray]:
    into = get_op(name).into
    assert into is not None
    return into.fn


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("alias", [False, True])
def test_log_softmax_into_is_the_kernel_bit_for_bit(axis: int, alias: bool) -> None:
    x = (_rng().standard_normal((6, 5, 9)) * 4).astype(np.float32)
    expected = get_op("log_softmax").kernel(x, axis=axis)
    out = x.copy() if alias else np.empty_like(x)
    got = _into("log_softmax")(out if alias else x, out=out, work=(np.empty_like(x),), axis=axis)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert got is out


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("alias", [False, True])
def test_softmax_into_is_the_kernel_bit_for_bit(axis: int, alias: bool) -> None:
    x = (_rng().standard_normal((6, 5, 9)) * 4).astype(np.float32)
    expected = get_op("softmax").kernel(x, axis=axis)
    out = x.copy() if alias else np.empty_like(x)
    got = _into("softmax")(out if alias else x, out=out, axis=axis)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert got is out


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("alias", [False, True])
def test_layer_norm_into_is_the_kernel_bit_for_bit(affine: bool, alias: bool) -> None:
    rng = _rng()
    x = (rng.standard_normal((4, 6, 16)) * 3 + 1).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32) if affine else None
    b = rng.standard_normal(16).astype(np.float32) if affine else None
    attrs: dict[str, Any] = {"normalized_shape": (16,), "eps": 1e-5}
    expected = get_op("layer_norm").kernel(x, w, b, **attrs)
    out = x.copy() if alias else np.empty_like(x)
    got = _into("layer_norm")(out if alias else x, w, b, out=out, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert np.shares_memory(got, out)
    # A non-contiguous out is not written through a copy: the result is still right.
    wide = np.empty((4, 6, 32), np.float32)[..., ::2]
    got = _into("layer_norm")(x, w, b, out=wide, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("alias", [None, "g", "x"])
def test_layer_norm_backward_into_is_bit_exact(affine: bool, alias: str | None) -> None:
    rng = _rng()
    x = (rng.standard_normal((4, 6, 16)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal((4, 6, 16)).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32) if affine else None
    attrs: dict[str, Any] = {"normalized_shape": (16,), "eps": 1e-5}
    expected = get_op("layer_norm_backward").kernel(g, x, w, **attrs)
    g2, x2 = g.copy(), x.copy()
    out = {"g": g2, "x": x2, None: np.empty_like(x)}[alias]
    work = (np.full_like(x, np.nan),)
    got = _into("layer_norm_backward")(g2, x2, w, out=out, work=work, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    got = _into("layer_norm_backward")(g, x, w, out=None, work=work, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_programs_write_softmax_and_layer_norm_into_buffers() -> None:
    g = Graph()
    x = g.input("x", (8, 5, 16))
    w, b = g.input("w", (16,)), g.input("b", (16,))
    h = g.apply("layer_norm", [x * 2.0, w, b], {"normalized_shape": (16,), "eps": 1e-5})
    y = (h * 3.0).softmax(-1) * 1.0
    program = compile([y])
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal((8, 5, 16)).astype(np.float32),
        "w": rng.standard_normal(16).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
    }
    (got,) = program(feeds)
    ln = get_op("layer_norm").kernel(
        feeds["x"] * np.float32(2.0), feeds["w"], feeds["b"], normalized_shape=(16,), eps=1e-5
    )
    expected = get_op("softmax").kernel(ln * np.float32(3.0), axis=-1)
    assert np.array_equal(got, expected)
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    lines = fn.source.splitlines()
    assert any("out=" in line and "(v" in line and " = z" in line for line in lines)
    assert sum(" = z" in line and "out=" in line for line in lines) == 2, fn.source


FAST: dict[str, Callable[..., np.ndarray]] = {
    "erf": erf_f32,
    "gelu": gelu_f32,
}


def _inputs(name: str) -> list[tuple[np.ndarray, dict[str, object]]]:
    op = get_op(name)
    assert op.cases is not None
    out = [(c.inputs[0], dict(c.attrs)) for c in op.cases(np.random.default_rng(0))]
    rng = np.random.default_rng(1)
    out.append((rng.standard_normal((16, 64, 33)) * 4.0, {}))
    out.append((np.array([-40.0, -3.0, -1e-30, 0.0, 1e-30, 2.5, 40.0]), {}))
    if name == "erf":  # GELU is 0 * inf there, in its kernel too
        out.append((np.array([-np.inf, np.inf]), {}))
    return out


@pytest.mark.parametrize("name", sorted(FAST))
def test_fast_path_matches_the_kernel_within_the_op_tolerance(name: str) -> None:
    op = get_op(name)
    rtol, atol = op.tolerance
    for x, given in _inputs(name):
        attrs = op.normalize_attrs(given)
        if x.ndim == 0 or attrs.get("approximate") not in (None, "none"):
            continue
        x32 = x.astype(np.float32)
        expected = op.kernel(x.astype(np.float64), **attrs)
        got = FAST[name](x32, **attrs)
        assert got.dtype == np.float32
        assert got.shape == x.shape
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def test_nan_propagates() -> None:
    x = np.array([np.nan, 1.0], np.float32)
    assert np.isnan(erf_f32(x)[0])
    assert np.isnan(gelu_f32(x, approximate="none")[0])


def test_programs_use_the_fast_path_for_float32_only() -> None:
    g = Graph()
    x32, x64 = g.input("a", (4, 5)), g.input("b", (4, 5), "float64")
    program = compile([x32.gelu(), x32.erf(), x64.gelu(), x32.gelu("tanh")])
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5))
    ga, ea, gb, ta = program({"a": a, "b": b})
    np.testing.assert_allclose(ga, get_op("gelu").kernel(a.astype(np.float64)), atol=2e-6)
    np.testing.assert_allclose(ea, get_op("erf").kernel(a.astype(np.float64)), atol=2e-6)
    np.testing.assert_array_equal(gb, get_op("gelu").kernel(b))  # float64: the kernel itself
    np.testing.assert_array_equal(ta, get_op("gelu").kernel(a, approximate="tanh"))
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    assert _calls_of(fn, gelu_f32) == 1
    assert _calls_of(fn, erf_f32) == 1


def _calls_of(fn: Any, path: Callable[..., np.ndarray]) -> int:
    """How many lines of a generated function call ``path`` (as ``z<i>``)."""
    count = 0
    for name in re.findall(r"= (z\d+)\(", fn.source):
        z = fn.__globals__[name]
        count += getattr(z, "func", z) is path
    return count


def _declared() -> list[tuple[str, Any]]:
    return [(op.name, op.into) for op in all_ops() if op.into is not None]


def test_the_float32_paths_are_declared() -> None:
    assert {name for name, _ in _declared()} == {
        "erf",
        "gelu",
        "gelu_backward",
        "softmax",
        "log_softmax",
        "layer_norm",
        "layer_norm_backward",
    }


@pytest.mark.parametrize(("name", "into"), _declared(), ids=[n for n, _ in _declared()])
def test_every_float32_path_matches_its_kernel_on_the_op_cases(name: str, into: Any) -> None:
    """Fresh, into ``out`` and with scratch: bit for bit (exact) or within tolerance."""
    op = get_op(name)
    assert op.cases is not None
    rtol, atol = op.tolerance
    for case in op.cases(np.random.default_rng(0)):
        inputs = [np.asarray(a).astype(np.float32) for a in case.inputs]
        if not inputs[0].ndim or (into.when is not None and not into.when(case.attrs)):
            continue
        expected = op.kernel(*inputs, **case.attrs)
        work = {"work": tuple(np.full_like(expected, np.nan) for _ in range(into.work))}
        out = np.full_like(expected, np.nan)
        got = into.fn(*inputs, out=out, **(work if into.work else {}), **case.attrs)
        assert got.shape == expected.shape
        assert got.dtype == np.float32
        if into.exact:
            assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
        else:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
            fresh = into.fn(*inputs, **case.attrs)
            assert np.array_equal(fresh.view(np.uint32), got.view(np.uint32))
