"""Caches of compiled code are bounded and evict the entry used least recently."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.tensor import ArgumentError, Graph, compile, evaluate
from asgrad.tensor.cpu import backend as cpu_backend
from asgrad.tensor.ir.cache import LRUCache


def test_lru_cache_evicts_the_least_recently_used() -> None:
    cache: LRUCache[int, str] = LRUCache(2)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache.get(1) == "a"  # 1 is now the most recent
    cache.put(3, "c")
    assert 2 not in cache
    assert cache.get(1) == "a"
    assert cache.get(3) == "c"
    assert len(cache) == 2
    with pytest.raises(ArgumentError, match="at least one entry"):
        LRUCache(0)


def test_evaluate_keeps_a_bounded_number_of_programs() -> None:
    g = Graph()
    x = g.input("x", (3,))
    feed = {"x": np.ones(3, np.float32)}
    for k in range(3 * Graph.MAX_PROGRAMS):
        (got,) = evaluate([x * float(k)], feed)
        assert got[0] == k
    assert len(g.programs) == Graph.MAX_PROGRAMS


def test_cycling_through_more_shapes_than_the_cache_holds_reuses_recent_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generated: list[Any] = []
    real = cpu_backend.generate_cpu_function

    def counting(*args: Any, **kwargs: Any) -> Any:
        generated.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(cpu_backend, "generate_cpu_function", counting)
    g = Graph()
    x = g.input("x", (1, 2))
    program = compile([(x * 2.0).sum(axis=1)])
    limit = cpu_backend.CPUExecutable.MAX_SPECIALIZATIONS
    batches = range(1, limit + 2)  # one more shape than the cache holds
    for b in batches:
        program({"x": np.ones((b, 2), np.float32)})
    assert len(generated) == limit + 1
    for b in batches[1:]:  # the most recent ones are still there
        (got,) = program({"x": np.ones((b, 2), np.float32)})
        np.testing.assert_array_equal(got, np.full(b, 4.0, np.float32))
    assert len(generated) == limit + 1
