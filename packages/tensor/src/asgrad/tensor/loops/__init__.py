"""Loops as graph nodes: [`scan`][asgrad.tensor.scan], [`fori_loop`][asgrad.tensor.fori_loop] and
[`while_loop`][asgrad.tensor.while_loop].

The body is a Python function called once, on symbolic tensors, to build a sub-graph
(`asgrad.tensor.loops.body`); the loop is one ``scan`` node however many steps it runs,
so a 512-step recurrence compiles as fast as one step. Values of the enclosing graph
the body uses (weights it closes over) are read by the node, so gradients reach them.

The subpackage may import `errors`, `ir`,
`api` and itself; a backend lends it the compiler of loop bodies
(`asgrad.tensor.loops.body.set_compiler`).

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> xs = g.input("xs", (4, 2), free=())
>>> total, running = scan(lambda c, x: (c + x, c + x), g.constant(np.zeros(2, np.float32)), xs)
>>> evaluate([total, running], {"xs": np.ones((4, 2), np.float32)})[1][:, 0].tolist()
[1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, DTypeError, GraphError
from asgrad.tensor.ir.graph import Graph, user_location
from asgrad.tensor.ir.registry import TensorType
from asgrad.tensor.loops.body import Body, trace, tracing

__all__ = ["fori_loop", "scan", "while_loop"]

Structure = Callable[[list[Tensor]], Any]


def _flatten(value: Any, what: str) -> tuple[list[Tensor], Structure]:
    """A carry, xs or ys as a flat list of tensors, and how to rebuild its structure
    (None, one tensor, or a tuple or list of tensors)."""
    if value is None:
        return [], lambda flat: None
    if isinstance(value, Tensor):
        return [value], lambda flat: flat[0]
    if isinstance(value, tuple | list) and all(isinstance(v, Tensor) for v in value):
        kind = type(value)
        return list(value), lambda flat: kind(flat)
    raise ArgumentError(
        f"{what} must be a Tensor, a tuple or list of Tensors, or None; got {type(value).__name__}"
    )


def _where(fn: Callable[..., Any]) -> tuple[str, str]:
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", type(fn).__name__)
    if code is None:
        return name, user_location()
    return name, f"{code.co_filename}:{code.co_firstlineno}"


def _enclosing(values: list[Tensor]) -> Graph:
    """The graph the loop node goes in: the innermost of the values' graphs and the body
    being traced, if any; all must be nested in one another."""
    graphs = [v.graph for v in values]
    inner = tracing()
    if inner is not None and all(g is inner or g.encloses(inner) for g in graphs):
        graphs.append(inner)
    if not graphs:
        raise ArgumentError("a loop needs a carry or xs (a Tensor) to know its graph")
    best = graphs[0]
    for g in graphs[1:]:
        if best.encloses(g):
            best = g
        elif g is not best and not g.encloses(best):
            raise GraphError(
                f"the loop's values belong to unrelated graphs ({best.label}, {g.label})"
            )
    return best


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    *,
    length: int | None = None,
    reverse: bool = False,
    save_carries: bool = True,
) -> tuple[Any, Any]:
    """``jax.lax.scan``: ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``.

    Returns ``(final carry, ys)``, each y stacked along a new leading axis. ``init``,
    ``xs`` and what ``f`` returns may be a Tensor, a tuple or list of Tensors, or None
    (no xs: give ``length``). ``reverse=True`` runs the steps last to first (ys stay
    indexed by step). ``f`` is called once, to build the body; every carry keeps its
    shape and dtype, and the carries and ys share one dtype. ``save_carries=False``
    keeps the carries of each step out of the result: the gradient then runs the
    loop forward again to get them.

    >>> from asgrad.tensor import Graph, evaluate, scan
    >>> xs = Graph().input("xs", (4,))
    >>> total, partial = scan(lambda c, x: (c + x, c + x), xs.graph.constant(0.0, "float32"), xs)
    >>> [a.tolist() for a in evaluate([total, partial], {"xs": [1.0, 2.0, 3.0, 4.0]})]
    [10.0, [1.0, 3.0, 6.0, 10.0]]
    """
    carries, carry_tree = _flatten(init, "scan: init")
    steps, x_tree = _flatten(xs, "scan: xs")
    if not steps:
        if length is None or int(length) < 0:
            raise ArgumentError("scan: without xs, give length=, the number of steps (>= 0)")
        length = int(length)
    else:
        first = steps[0].shape[0] if steps[0].shape else None
        if length is not None and first != length:
            raise ArgumentError(f"scan: length={length}, but xs have {first} steps")
        length = 0
    outer = _enclosing([*carries, *steps])
    y_trees: list[Structure] = []

    def call(c: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        result: Any = f(carry_tree(c), x_tree(x) if steps else None)
        if not isinstance(result, tuple) or len(result) != 2:
            raise GraphError(
                f"scan: the body must return (carry, y), got {type(result).__name__} (y may be"
                " None)"
            )
        new, _ = _flatten(result[0], "scan: the body's carry")
        ys, y_tree = _flatten(result[1], "scan: the body's y")
        if len(new) != len(c):
            raise GraphError(f"scan: the body returns {len(new)} carries for {len(c)}")
        y_trees.append(y_tree)
        return new, ys

    types = [t.node.type for t in carries] + [TensorType(t.shape[1:], t.dtype) for t in steps]
    name, where = _where(f)
    body = trace(call, name, where, outer, types, (len(carries), len(steps)))
    attrs = {"loop": body, "length": length, "save": bool(save_carries), "reverse": bool(reverse)}
    ins = [*carries, *steps, *(outer._wrap(n) for n in body.outer)]
    packed = outer.apply("scan", ins, attrs)
    parts = [
        outer.apply("scan_part", [packed, *ins], {**attrs, "part": p})
        for p in range(body.n_carry + body.n_y)
    ]
    return carry_tree(parts[: body.n_carry]), y_trees[-1](parts[body.n_carry :])


def fori_loop(lower: int, upper: int, body_fun: Callable[[Tensor, Any], Any], init_val: Any) -> Any:
    """``jax.lax.fori_loop``: ``val = body_fun(i, val)`` for ``i`` in ``range(lower,
    upper)`` (an int64 scalar), as one scan; differentiable (a fixed trip count).

    >>> from asgrad.tensor import Graph, evaluate, fori_loop
    >>> x = Graph().input("x", ())
    >>> evaluate(fori_loop(0, 3, lambda i, v: v * 2.0, x), {"x": 1.5})[0].tolist()
    12.0
    """
    carries, _ = _flatten(init_val, "fori_loop: init_val")
    graph = _enclosing(carries)
    index = graph.constant(np.arange(int(lower), max(int(upper), int(lower)), dtype=np.int64))

    @functools.wraps(body_fun)
    def step(val: Any, i: Tensor) -> tuple[Any, None]:
        return body_fun(i, val), None

    final, _ = scan(step, init_val, index)
    return final


def while_loop(
    cond_fun: Callable[[Any], Tensor],
    body_fun: Callable[[Any], Any],
    init_val: Any,
    *,
    max_steps: int,
) -> Any:
    """``jax.lax.while_loop``, bounded: ``val = body_fun(val)`` while ``cond_fun(val)``
    (a bool scalar), at most ``max_steps`` times.

    It runs ``max_steps`` steps, each keeping ``val`` once the condition fails; the
    result is differentiable with respect to what the steps taken depend on.

    >>> from asgrad.tensor import Graph, evaluate, while_loop
    >>> x = Graph().input("x", ())
    >>> out = while_loop(lambda v: v < 100.0, lambda v: v * 3.0, x, max_steps=10)
    >>> evaluate(out, {"x": 1.0})[0].tolist()
    243.0
    """
    if int(max_steps) < 0:
        raise ArgumentError(f"while_loop: max_steps must be >= 0, got {max_steps}")

    @functools.wraps(body_fun)
    def step(val: Any, _x: None) -> tuple[Any, None]:
        go: Any = cond_fun(val)
        if not isinstance(go, Tensor) or go.dtype != "bool" or go.shape != ():
            got = go.node.type if isinstance(go, Tensor) else type(go).__name__
            raise DTypeError(
                f"while_loop: cond_fun must return a bool scalar tensor, got {got}"
                f" (at {user_location()})"
            )
        new = body_fun(val)
        old_flat, tree = _flatten(val, "while_loop: init_val")
        new_flat, _ = _flatten(new, "while_loop: the body's value")
        if len(new_flat) != len(old_flat):
            raise GraphError(
                f"while_loop: the body returns {len(new_flat)} values for {len(old_flat)}"
            )
        kept = [
            go.graph.apply("where", (go, n, o), {}) for n, o in zip(new_flat, old_flat, strict=True)
        ]
        return tree(kept), None

    final, _ = scan(step, init_val, length=int(max_steps))
    return final


@functools.cache
def case_body(kind: str) -> Body:
    """A body for the registry's test cases of ``scan`` (float64, traced once)."""
    g = Graph(f"{kind} case")
    if kind == "rnn":
        w = g.input("w", (3, 3), "float64")

        def rnn(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
            new = (h @ w + x).tanh()
            return new, new.sin() * 2.0

        init, xs = g.input("h", (2, 3), "float64"), g.input("xs", (4, 2, 3), "float64")
        _, _ = scan(rnn, init, xs)
        fn: Callable[..., Any] = rnn
    else:

        def cumsum(s: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
            new = s + x
            return new, new * new

        init, xs = g.input("s", (3,), "float64"), g.input("xs", (5, 3), "float64")
        _, _ = scan(cumsum, init, xs, reverse=True)
        fn = cumsum
    body = g.nodes[-1].attrs["loop"]
    assert isinstance(body, Body)
    assert body.name == fn.__name__
    return body
