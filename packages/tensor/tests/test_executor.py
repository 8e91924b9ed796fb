"""The executor: freeing, feeds, program caching, shapes fed at run time.

Batch-size independence, the passes toggle and variable updates of graphs with
gradients are tested in ``packages/autograd/tests/test_cpu_backend_gradients.py``.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import asgrad.tensor.cpu.codegen as codegen
from asgrad.tensor import (
    Graph,
    OpDef,
    Variable,
    compile,
    evaluate,
    get_op,
    make_schedule,
)


def test_intermediates_are_freed_after_their_last_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap every kernel so that each step checks which earlier results are still alive."""
    g = Graph()
    x = g.input("x", (64,), "float64")
    a = x.exp()
    b = a.sin()
    c = b.cos() * a  # a is used again here, so it lives until this step
    d = c.tanh()
    out = (d * d).sum()
    schedule = make_schedule([out])
    step_of = {n.id: i for i, n in enumerate(schedule.nodes)}
    results: list[tuple[int, weakref.ref[np.ndarray]]] = []
    violations: list[str] = []
    real_get_op = get_op
    # The code generator asks for each node's op in schedule order: hand out the steps so.
    steps = {
        name: iter([step_of[n.id] for n in schedule.nodes if n.op == name])
        for name in {n.op for n in schedule.nodes}
    }

    def checking_get_op(name: str) -> OpDef:
        op = real_get_op(name)
        calls = steps[name]

        def kernel(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
            step = next(calls)
            for made_at, ref in results:
                node = schedule.nodes[made_at]
                if ref() is not None and schedule.last_use[node.id] < step:
                    violations.append(f"{node.name} alive at step {step}")
            value = np.asarray(op.kernel(*arrays, **attrs))
            results.append((step, weakref.ref(value)))
            return value

        return replace(op, kernel=kernel)

    monkeypatch.setattr(codegen, "get_op", checking_get_op)
    program = compile([out])
    X = np.linspace(-1, 1, 64)
    (value,) = program({"x": X})
    assert value == pytest.approx(
        float((np.tanh(np.cos(np.sin(np.exp(X))) * np.exp(X)) ** 2).sum())
    )
    assert [schedule.nodes[made].op for made, _ in results] == [
        "exp",
        "sin",
        "cos",
        "mul",
        "tanh",
        "mul",
        "sum",
    ]
    assert not violations, violations
    # Every intermediate is gone once the run is over; only the output may survive
    # (the wrapped kernels are unknown, so they may view the feed: the output handed
    # out is then a copy, and the kernel's own result is gone too).
    alive = [made for made, ref in results if ref() is not None]
    assert alive in ([len(schedule.nodes) - 1], [])


def test_update_with_wrong_shape_is_rejected() -> None:
    w = Variable("w", np.zeros((3,)))
    g = Graph()
    param = g.parameter("w", variable=w)
    with pytest.raises(Exception, match="update of 'w'"):
        make_schedule([], updates={w: param.sum()})


def test_evaluate_caches_programs_per_graph() -> None:
    g = Graph()
    x = g.input("x", (2,))
    y = x * 2.0
    evaluate([y], {"x": np.ones(2, np.float32)})
    evaluate([y], {"x": np.ones(5, np.float32)})
    assert len(g.programs) == 1
    (single,) = evaluate(y, {"x": np.array([1.0, 2.0], np.float32)})
    assert single.tolist() == [2.0, 4.0]
    assert single.dtype == np.float32


def test_feeds_are_converted_to_the_declared_dtype() -> None:
    g = Graph()
    x = g.input("x", (2,))
    (value,) = evaluate([x + 1.0], {"x": np.array([1, 2])})
    assert value.dtype == np.float32
    assert value.tolist() == [2.0, 3.0]


def test_flatten_does_not_bake_in_the_batch_size() -> None:
    g = Graph()
    x = g.input("x", (3, 2, 5), "float64")
    flat, tail = x.flatten(1), x.flatten(2)
    program = compile([flat, tail])
    for batch in (3, 7):
        X = np.arange(batch * 10, dtype=np.float64).reshape(batch, 2, 5)
        got_flat, got_tail = program({"x": X})
        np.testing.assert_array_equal(got_flat, X.reshape(batch, 10))
        np.testing.assert_array_equal(got_tail, X)
    assert x.flatten().shape == (30,)
