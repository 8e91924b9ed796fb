"""An integer sum is int64 in the graph and in the result, so an int32 total never wraps."""

from __future__ import annotations

import numpy as np

from asgrad.tensor import Graph, evaluate


def test_an_int32_sum_is_declared_and_computed_as_int64() -> None:
    g = Graph()
    x = g.input("x", (3,), "int32")
    total, rows = x.sum(), x.reshape(1, 3).sum(axis=1, keepdims=True)
    assert total.dtype == "int64"
    assert rows.dtype == "int64"
    feed = {"x": np.array([2**31 - 1, 2, 3], np.int32)}
    out_total, out_rows = evaluate([total, rows], feed)
    assert out_total.dtype == np.int64
    assert int(out_total) == 2**31 + 4
    assert out_rows.dtype == np.int64
    assert out_rows.tolist() == [[2**31 + 4]]


def test_float_and_int64_sums_keep_their_dtype() -> None:
    g = Graph()
    assert g.input("f", (3,)).sum().dtype == "float32"
    assert g.input("i", (3,), "int64").sum().dtype == "int64"
