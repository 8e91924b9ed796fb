"""Constant folding checks sizes before it computes: no large constant is materialised."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

from asgrad.tensor import Graph, Tensor, make_schedule
from asgrad.tensor.cpu.codegen import generate_cpu_function

SIDE = 3000  # a 3000 x 3000 float32 value is 36 MB


def _big_constant_sum() -> Tensor:
    c = Graph().constant(np.float32(1.5)).broadcast_to((SIDE, SIDE))
    return (c * 2.0).sum()


def _peak_bytes(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_graph_passes_do_not_fold_a_large_broadcast_constant() -> None:
    total = _big_constant_sum()
    peak = _peak_bytes(lambda: make_schedule([total]))
    assert peak < 4_000_000, f"the passes allocated {peak / 1e6:.0f} MB"


def test_cpu_code_generation_does_not_fold_a_large_constant() -> None:
    schedule = make_schedule([_big_constant_sum()])
    types = schedule.infer_types({})
    peak = _peak_bytes(lambda: generate_cpu_function(schedule, types))
    assert peak < 4_000_000, f"code generation allocated {peak / 1e6:.0f} MB"
    # ... and the value is still right when the function runs.
    run = generate_cpu_function(schedule, types)
    (value,) = run({})
    assert float(value) == SIDE * SIDE * 3.0
