"""Kernels declaring ``writes_out`` (conv, pool, scatter_slice) write into ``out=``.

The CPU backend lends them scratch slots; ``out`` must get the bits of a fresh
result, whatever it held before.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor.ir.registry import all_ops, get_op

WRITES_OUT = sorted(op.name for op in all_ops() if op.writes_out)


def test_the_conv_and_pool_kernels_declare_out() -> None:
    assert {"conv2d", "conv2d_backward_input", "conv2d_backward_weight"} <= set(WRITES_OUT)
    assert {"max_pool2d", "max_pool2d_backward", "scatter_slice"} <= set(WRITES_OUT)


def _cases() -> list[tuple[str, int]]:
    out = []
    for name in WRITES_OUT:
        cases = get_op(name).cases
        assert cases is not None
        out += [(name, k) for k in range(len(cases(np.random.default_rng(0))))]
    return out


@pytest.mark.parametrize(("name", "k"), _cases())
def test_out_gets_the_same_bits_as_a_fresh_result(name: str, k: int) -> None:
    op = get_op(name)
    assert op.cases is not None
    case = op.cases(np.random.default_rng(0))[k]
    for dtype in (np.float32, np.float64):
        inputs = [np.asarray(a).astype(dtype) for a in case.inputs]
        fresh = op.kernel(*inputs, **case.attrs)
        out = np.full(fresh.shape, np.nan, dtype=dtype)  # stale contents must not leak
        got = op.kernel(*inputs, **case.attrs, out=out)
        assert got is out
        np.testing.assert_array_equal(got, fresh)
        assert np.array_equal(got.view(np.uint8), fresh.view(np.uint8))  # signed zeros too
