"""Softmax and layer norm (and its backward) writing into scratch slots or dying inputs.

The executor runs these ops' float32 paths with ``out=`` (and a scratch array for the
backward); results must be bit for bit those of the registered kernels, aliased or not.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, compile, cpu_kernels, get_op
from asgrad.tensor.executor import CPUExecutable
from asgrad.tensor.ops import nn as nn_ops


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("alias", [False, True])
def test_softmax_into_is_the_kernel_bit_for_bit(axis: int, alias: bool) -> None:
    x = (_rng().standard_normal((6, 5, 9)) * 4).astype(np.float32)
    expected = get_op("softmax").kernel(x, axis=axis)
    out = x.copy() if alias else np.empty_like(x)
    got = cpu_kernels.softmax_into(out if alias else x, out, axis=axis)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert got is out


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("alias", [False, True])
def test_layer_norm_into_is_the_kernel_bit_for_bit(affine: bool, alias: bool) -> None:
    rng = _rng()
    x = (rng.standard_normal((4, 6, 16)) * 3 + 1).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32) if affine else None
    b = rng.standard_normal(16).astype(np.float32) if affine else None
    attrs = {"normalized_shape": (16,), "eps": 1e-5}
    expected = get_op("layer_norm").kernel(x, w, b, **attrs)
    out = x.copy() if alias else np.empty_like(x)
    got = nn_ops.layer_norm_into(out if alias else x, w, b, out=out, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert np.shares_memory(got, out)
    # A non-contiguous out is not written through a copy: the result is still right.
    wide = np.empty((4, 6, 32), np.float32)[..., ::2]
    got = nn_ops.layer_norm_into(x, w, b, out=wide, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("alias", [None, "g", "x"])
def test_layer_norm_backward_into_is_bit_exact(affine: bool, alias: str | None) -> None:
    rng = _rng()
    x = (rng.standard_normal((4, 6, 16)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal((4, 6, 16)).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32) if affine else None
    attrs = {"normalized_shape": (16,), "eps": 1e-5}
    expected = get_op("layer_norm_backward").kernel(g, x, w, **attrs)
    g2, x2 = g.copy(), x.copy()
    out = {"g": g2, "x": x2, None: np.empty_like(x)}[alias]
    work = (np.full_like(x, np.nan),)
    got = nn_ops.layer_norm_backward_into(g2, x2, w, out=out, work=work, **attrs)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    got = nn_ops.layer_norm_backward_into(g, x, w, out=None, work=work, **attrs)
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
