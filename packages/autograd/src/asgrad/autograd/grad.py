"""Graph-to-graph reverse-mode differentiation."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from asgrad.autograd.rules import get_rule
from asgrad.tensor import Node, Tensor, concat, topological_order
from asgrad.tensor.api.arguments import require_tensor, require_tensors
from asgrad.tensor.errors import GraphError, NotDifferentiableError, ShapeError
from asgrad.tensor.ir.dtypes import is_float
from asgrad.tensor.ir.graph import Graph, user_location
from asgrad.tensor.ir.registry import get_op
from asgrad.tensor.ir.retrace import traced
from asgrad.tensor.ir.scopes import node_meta


def grad(y: Tensor, wrt: Sequence[Tensor], seed: Tensor | None = None) -> list[Tensor]:
    """Gradients of ``y`` with respect to each of ``wrt``, appended to y's graph.

    ``y`` must be a scalar unless ``seed`` (the gradient flowing into ``y``, shaped
    like it) is given. Contributions are summed where a value is used more than once,
    and broadcast gradients are summed back to each operand's shape at every node.
    The result is graph, so it can be compiled, run on any backend, or differentiated
    again. The nodes it makes record ``role="gradient"`` in their ``meta``, the
    forward node whose backward they compute (``grad_of``) and a ``backward.<scope>``
    scope; each result records the names of the values it is the gradient of
    (``grad_wrt``), for the graph viewer.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x = g.input("x", (3,), "float64")
    >>> (dx,) = grad((x * x).sum(), [x])
    >>> evaluate([dx], {"x": np.array([1.0, 2.0, 3.0])})[0].tolist()
    [2.0, 4.0, 6.0]
    """
    y = require_tensor(y, "grad: y")
    wrt = require_tensors(wrt, "grad: wrt")
    given = [] if seed is None else [require_tensor(seed, "grad: seed")]

    def build(graph: Graph, ins: list[Tensor]) -> list[Tensor]:
        with node_meta(role="gradient", scope="backward"):
            return _grad(ins[0], ins[1 : 1 + len(wrt)], ins[-1] if given else None)

    # recorded, so that a graph traced again at other sizes differentiates them anew
    return traced(y.graph, "grad", [y, *wrt, *given], build, user_location())


def _grad(y: Tensor, wrt: Sequence[Tensor], seed: Tensor | None) -> list[Tensor]:
    y = require_tensor(y, "grad: y")
    wrt = require_tensors(wrt, "grad: wrt")
    if seed is not None:
        seed = require_tensor(seed, "grad: seed")
    graph = y.graph
    if seed is None:
        if y.shape != ():
            raise ShapeError(
                f"grad of a non-scalar {y.node.type}: reduce it first (y.sum()) or pass"
                " seed=, the gradient flowing into y"
            )
        if not is_float(y.dtype):
            raise NotDifferentiableError(f"cannot differentiate {y.dtype} value {y.name}")
        seed = graph.constant(1.0, y.dtype)
    elif seed.shape != y.shape or seed.dtype != y.dtype:
        raise ShapeError(f"seed is {seed.node.type}; it must match y, {y.node.type}")
    for t in wrt:
        if t.graph is not graph:
            raise GraphError(f"{t.name} belongs to another graph than y")
        if not is_float(t.dtype):
            raise NotDifferentiableError(
                f"{t.name} is {t.dtype}; only float values (float16, float32, float64)"
                " have gradients"
            )

    order = topological_order([y.node])
    targets = {t.node.id for t in wrt}
    # Nodes on a path from some wrt to y: only they need gradients.
    relevant: set[int] = set()
    for node in order:
        if node.id in targets or any(i.id in relevant for i in node.inputs):
            relevant.add(node.id)

    pending: dict[int, list[Tensor]] = {y.node.id: [seed]}
    done: dict[int, Tensor] = {}
    for node in reversed(order):
        parts = pending.pop(node.id, None)
        if parts is None or node.id not in relevant:
            continue
        with node_meta(grad_of=node.name, scope=_backward_scope(node)):
            _backward(node, parts, relevant, pending, done)
    results = []
    for t in wrt:
        if t.node.id in done:
            results.append(done[t.node.id])
        else:
            zero = graph.constant(0, t.dtype)
            results.append(graph.apply("broadcast_like", (zero, t)))
    for t, r in zip(wrt, results, strict=True):
        r.node.meta = {**r.node.meta, "grad_wrt": [*r.node.meta.get("grad_wrt", ()), t.name]}
    return results


def _backward_scope(node: Node) -> str:
    scope = node.meta.get("scope", "")
    if node.meta.get("role") == "gradient" or scope.startswith("backward"):
        return str(scope)  # a second derivative stays in the first's scope
    return f"backward.{scope}" if scope else "backward"


def _backward(
    node: Node,
    parts: list[Tensor],
    relevant: set[int],
    pending: dict[int, list[Tensor]],
    done: dict[int, Tensor],
) -> None:
    """Sum the gradient ``parts`` of ``node``, and send contributions to its inputs."""
    g = _sum(parts)
    done[node.id] = g
    if not node.inputs:
        return
    needs = tuple(i.id in relevant and is_float(i.dtype) for i in node.inputs)
    if not any(needs):
        return
    opdef = get_op(node.op)
    if not opdef.differentiable:
        return  # piecewise-constant ops (comparisons, sign, argmax): zero gradient
    rule = get_rule(node.op)
    if rule is None:
        raise NotDifferentiableError(
            f"op {node.op!r} (made at {node.location}) has no gradient rule;"
            " register one with asgrad.autograd.rule"
        )
    out = Tensor(node)
    inputs = tuple(Tensor(i) for i in node.inputs)
    contributions = rule(g, out, inputs, node.attrs, needs)
    for inp, need, contrib in zip(node.inputs, needs, contributions, strict=True):
        if not need or contrib is None:
            continue
        pending.setdefault(inp.id, []).append(_fit(contrib, inp, node))


def _sum(parts: list[Tensor]) -> Tensor:
    parts = _joined_slices(parts) if len(parts) > 1 else parts
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _fit(contrib: Tensor, inp: Node, node: Node) -> Tensor:
    """Sum a broadcast contribution down to the operand's shape (at every node)."""
    if contrib.dtype != inp.dtype:
        contrib = contrib.cast(inp.dtype)
    # A size-1 axis of the operand may be broadcast at run time even when the static
    # shapes agree (an input declared with batch 1, fed batch 7, added to a (1, n)
    # parameter), so such operands always get a sum_to_like; it is free when the
    # run-time shapes agree.
    if contrib.shape != inp.shape or 1 in inp.shape:
        contrib = contrib.graph.apply("sum_to_like", (contrib, Tensor(inp)))
    return contrib


def _joined_slices(parts: list[Tensor]) -> list[Tensor]:
    """``parts`` with the gradients of slices that tile one value along one axis (each
    a ``scatter_slice``: zeros but for its slice; an LSTM's four gates) joined into one
    ``concat`` of their slices, which is their sum, at the first one's place.

    Only in a loop body, where a time step's arrays are small and each op costs a call
    per step; elsewhere the GPU plan fuses the scatters and adds (a transformer's qkv
    gradient: four more dispatches as a concat), so the graph keeps them."""
    from asgrad.tensor.loops.body import BodyGraph

    if not parts or not isinstance(parts[0].graph, BodyGraph):
        return parts
    groups: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for at, p in enumerate(parts):
        span = _slice_span(p.node)
        if span is not None:
            axis, start, stop = span
            groups.setdefault((p.node.inputs[1].id, axis), []).append((start, stop, at))
    joined: dict[int, Tensor | None] = {}  # a part's place -> its group's concat, or None
    for (_, axis), pieces in groups.items():
        pieces.sort()
        like = parts[pieces[0][2]].node.inputs[1]
        tiles = (
            len(pieces) > 1
            and pieces[0][0] == 0
            and pieces[-1][1] == like.shape[axis]
            and all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
        )
        # In a body every input axis is declared free (it is typed again at its scan's
        # inputs): the slices' bounds, fixed when it was traced, are the axis' size (a
        # body slicing a free axis of the enclosing graph gets a shape error at another
        # size, not a wrong value).
        if not tiles:
            continue
        whole = concat([Tensor(parts[at].node.inputs[0]) for _, _, at in pieces], axis=axis)
        first = min(at for _, _, at in pieces)
        for _, _, at in pieces:
            joined[at] = whole if at == first else None
    if not joined:
        return parts
    out: list[Tensor] = []
    for at, p in enumerate(parts):
        if at not in joined:
            out.append(p)
        elif (sum_of_slices := joined[at]) is not None:
            out.append(sum_of_slices)
    return out


def _slice_span(node: Node) -> tuple[int, int, int] | None:
    """``(axis, start, stop)`` of a ``scatter_slice`` whose index is a slice of one
    axis (step 1) and whole slices elsewhere; None for any other node."""
    if node.op != "scatter_slice":
        return None
    index = node.attrs["index"]
    shape = node.shape
    if not isinstance(index, tuple) or len(index) > len(shape):
        return None
    span = None
    for axis, s in enumerate(index):
        if not isinstance(s, slice) or s.step not in (None, 1):
            return None
        start = 0 if s.start is None else s.start
        stop = shape[axis] if s.stop is None else s.stop
        if not (isinstance(start, int) and isinstance(stop, int)):
            return None
        if (start, stop) == (0, shape[axis]):
            continue
        if span is not None or not 0 <= start < stop <= shape[axis]:
            return None
        span = (axis, start, stop)
    return span
