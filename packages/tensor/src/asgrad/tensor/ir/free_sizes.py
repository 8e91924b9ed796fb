"""Which axes of a value follow the free axes of the graph's inputs.

An input's free axes (``g.input(..., free=...)``) may be fed at any size. A value's
axis *follows* a free axis when its size changes with the fed size. Ops that build
index tables or masks for the declared size of an axis ask here at build time, so
that they can build a size-polymorphic form, or refuse the free axis naming the op,
the axis and the user's line, instead of failing (or not) depending on the size fed.

The answer comes from the shape rules themselves: every node the value depends on is
re-inferred with each free axis one larger than declared, and the axes whose size
changed are the free ones. When the rules refuse that size (a graph that runs only
at its declared sizes) the answer is ``None``: unknown.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from asgrad.tensor.errors import AsgradError, FreeAxisError
from asgrad.tensor.ir.registry import Attrs, OpDef, TensorType, get_op
from asgrad.tensor.ir.retrace import mark_specialised

if TYPE_CHECKING:
    from asgrad.tensor.ir.graph import Graph, Node

__all__ = ["free_axes_of", "free_reshape_target", "probe_type", "refuse_tied_free_axes"]

# Per graph and probe: each node's type at the probe sizes (None: the rules refuse them).
_PROBES: dict[str, weakref.WeakKeyDictionary[Graph, dict[int, TensorType | None]]] = {
    "grown": weakref.WeakKeyDictionary(),
    "one": weakref.WeakKeyDictionary(),
    "double": weakref.WeakKeyDictionary(),
}
_SIZES: dict[str, Callable[[int], int]] = {
    "grown": lambda d: d + 1,
    "one": lambda d: 1,
    "double": lambda d: 2 * d,
}


def _probe_type(node: Node, probe: str = "grown") -> TensorType | None:
    """``node``'s type with every free input axis one larger than declared
    (``probe="grown"``), of size 1 (``"one"``) or twice the declared size
    (``"double"``: every factor of the declared size divides it still)."""
    tables = _PROBES[probe]
    known = tables.setdefault(node.graph, {})
    if node.id in known:
        return known[node.id]
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:  # depth first, stopping at nodes already known
        n, ready = stack.pop()
        table = tables.setdefault(n.graph, {})
        if n.id in table:
            continue
        if not ready:
            stack.append((n, True))
            stack.extend((i, False) for i in n.inputs if i.id not in tables.get(i.graph, {}))
            continue
        table[n.id] = _probe_one(n, probe, tables)
    return known.get(node.id)


def _probe_one(
    n: Node,
    probe: str,
    tables: weakref.WeakKeyDictionary[Graph, dict[int, TensorType | None]],
) -> TensorType | None:
    if n.op == "input":
        free = n.attrs.get("free", ())
        size = _SIZES[probe]
        shape = tuple(size(d) if a in free else d for a, d in enumerate(n.shape))
        return TensorType(shape, n.dtype)
    if not n.inputs:
        return n.type
    ins = [tables.get(i.graph, {}).get(i.id) for i in n.inputs]
    if any(t is None for t in ins):
        return None
    try:
        return get_op(n.op).infer(ins, n.attrs)  # type: ignore[arg-type]  # none is None
    except (AsgradError, KeyError, TypeError, ValueError):
        return None  # the rules hold at the declared sizes only


def probe_type(node: Node, probe: str = "grown") -> TensorType | None:
    """``node``'s type with every free input axis one larger than declared
    (``probe="grown"``), of size 1 (``"one"``) or twice the declared size
    (``"double"``); ``None``: the shape rules refuse those sizes."""
    return _probe_type(node, probe)


def free_axes_of(node: Node) -> frozenset[int] | None:
    """The axes of ``node``'s value whose size follows a free input axis (``None``:
    unknown, because the shape rules refuse other sizes)."""
    probe = _probe_type(node)
    if probe is None or len(probe.shape) != len(node.shape):
        return None
    return frozenset(
        a for a, (d, p) in enumerate(zip(node.shape, probe.shape, strict=True)) if d != p
    )


def free_reshape_target(node: Node, target: tuple[int, ...]) -> tuple[int, ...]:
    """``target`` with ``-1`` on the axis that holds ``node``'s one free axis whole, so
    that a reshape written with the declared sizes follows the size fed.

    The free axis ``i`` of a shape ``s`` lies whole inside target axis ``j`` when the
    target's axes before ``j`` divide ``s[:i]`` and those after ``j`` divide ``s[i+1:]``
    (``(L, B, E) -> (L, B * H, E / H)``). Unchanged when there is no such axis, more
    than one, several free axes, or a ``-1`` already.
    """
    free = free_axes_of(node)
    shape = node.shape
    if not free or len(free) != 1 or -1 in target or math.prod(target) != math.prod(shape):
        return target
    (i,) = free
    before, after = math.prod(shape[:i]), math.prod(shape[i + 1 :])
    if before * after * shape[i] == 0:
        return target
    fits = [
        j
        for j in range(len(target))
        if before % math.prod(target[:j]) == 0 and after % math.prod(target[j + 1 :]) == 0
    ]
    if len(fits) != 1:
        fits = _split_free_axis(node, target, i)
    if len(fits) != 1:
        return target
    return tuple(-1 if j == fits[0] else d for j, d in enumerate(target))


def _split_free_axis(node: Node, target: tuple[int, ...], i: int) -> list[int]:
    """The target axes that can hold the change of free axis ``i`` when the target
    splits it into several (``(B * T, C) -> (B, T, C)``): the group of target axes
    whose sizes multiply to it, each axis of the group whose size, scaled by the axis'
    change at the probe sizes, stays whole (``(2 * 5, C)`` probed at ``(3 * 5, C)``:
    the 2 becomes 3, the 5 would become 7.5). Ambiguous groups give several."""
    shape, probe = node.shape, _probe_type(node)
    if probe is None:
        return []
    before, after = math.prod(shape[:i]), math.prod(shape[i + 1 :])
    j = next((j for j in range(len(target) + 1) if math.prod(target[:j]) == before), None)
    k = next((k for k in range(len(target), -1, -1) if math.prod(target[k:]) == after), None)
    if j is None or k is None or j >= k or math.prod(target[j:k]) != shape[i]:
        return []
    grown = probe.shape[i]
    return [m for m in range(j, k) if target[m] and target[m] * grown % shape[i] == 0]


def refuse_tied_free_axes(op: OpDef, inputs: Sequence[Node], attrs: Attrs, where: str) -> None:
    """A build-time [`FreeAxisError`][asgrad.tensor.FreeAxisError] when ``op``'s shape rule,
    which ties its inputs' sizes (``OpDef.ties_free_axes``), fails with every free input
    axis one larger: a free axis of an input that the rule holds at one size only. Inside
    an expansion or a ``grad`` (the gradient of an op built for the declared sizes), the
    call is marked specialised instead: built again at the sizes fed."""
    probes: list[TensorType] = []
    for n in inputs:
        probe = _probe_type(n)
        if probe is None:
            return
        probes.append(probe)
    grown = [(k, n, p) for k, (n, p) in enumerate(zip(inputs, probes, strict=True)) if p != n.type]
    if not grown:
        return
    try:
        op.infer(probes, attrs)
    except (AsgradError, ValueError):
        if mark_specialised():  # in an expansion or a grad: built again at the fed sizes
            return
        k, node, probe = grown[0]
        axis = next(
            (a for a, (d, p) in enumerate(zip(node.shape, probe.shape, strict=True)) if d != p), 0
        )
        raise FreeAxisError(
            f"{op.name}: axis {axis} of its input {k} ({node.type}) follows a free axis of an"
            f" input (its size may change per run), but {op.name} takes it at its declared"
            f" size {node.shape[axis]} only. Declare that input axis fixed"
            f" (g.input(..., free=...) without it)\n  (at {where})"
        ) from None
