"""A sum over a transposed intermediate has the same bits with and without CPU buffer
reuse (``unfold``'s expansion ends in a transpose, so its results depend on it).

Without reuse, numpy lays an elementwise result out as its (transposed) input; with
reuse it lands in a C-ordered scratch slot; the CPU backend's sum reads both in C
order, so the pairwise summation rounds alike.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, compile


def test_a_sum_over_a_transposed_value_is_bit_identical_with_and_without_reuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = np.random.default_rng(1).standard_normal((2, 5, 2, 3)).astype(np.float32)
    results = []
    for reuse in ("0", "1"):
        monkeypatch.setenv("ASGRAD_CPU_REUSE", reuse)
        g = Graph()
        y = (g.input("x", a.shape) * 1.0).transpose(0, 1, 3, 2)
        program = compile([(y - 0.5).sum(), ((y * 2.0 + 1.0) * y).sum()])
        results.append([float(v) for v in program({"x": a})])
    assert results[0] == results[1]
