"""A mixed-precision step's backward reads attention's probabilities in float16.

Under ``precision="mixed"`` a softmax runs in float32 and its probabilities are cast
to float16 for the product that reads them (attention's ``p @ v``). The softmax's
gradient (``p * (g - sum(g * p))``) reads the probabilities too: kept in float32 for
it, they would cost twice the bytes of the float16 copy the product's gradient keeps
anyway, and a launch of their own. `read_saved_half` makes every backward reader of
such a softmax read the float16 copy, widened to float32 (the gradient's arithmetic
stays float32): the step keeps only the float16 probabilities, and the forward
softmax writes only them. PyTorch's autocast keeps the float32 probabilities; the
gradients here differ from that by the probabilities' float16 rounding, the rounding
the product's gradient already sees. `asgrad.tensor.make_schedule` applies it to every
schedule, so every backend computes the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.memory import forward_ids

__all__ = ["read_saved_half"]


def read_saved_half(nodes: Sequence[Node], roots: Sequence[Node]) -> tuple[list[Node], list[Node]]:
    """``nodes`` and ``roots`` where each backward reader of a forward float32 softmax
    that ``precision="mixed"`` casts to float16 in the forward reads that float16 copy
    widened (one new ``cast`` node per softmax, right before its first reader);
    unchanged where there is no such softmax, or no backward.

    >>> from asgrad.tensor import Graph, Tensor, make_schedule
    >>> from asgrad.tensor.api.precision import mixed_precision
    >>> from asgrad.tensor.ir.scopes import node_meta
    >>> q = Graph().input("q", (4, 8))
    >>> [y], _ = mixed_precision([(q @ q.T).softmax(-1) @ q])  # p cast to float16
    >>> p = y.node.inputs[0].inputs[0].inputs[0]  # y = cast(cast(p, f16) @ cast(q))
    >>> with node_meta(role="gradient"):  # a backward pass reading the probabilities
    ...     dp = Tensor(p) * 2.0
    >>> steps = make_schedule([y.sum(), dp]).nodes
    >>> mul = next(n for n in steps if n.op == "mul" and n.meta.get("role") == "gradient")
    >>> [(i.op, i.dtype, i.inputs[0].dtype) for i in mul.inputs if i.op == "cast"]
    [('cast', 'float32', 'float16')]
    """
    forward = forward_ids(nodes, roots)
    if len(forward) == len(nodes):
        return list(nodes), list(roots)
    halves: dict[int, Node] = {}  # softmax id -> its forward float16 copy
    for node in nodes:
        if (
            node.op == "cast"
            and node.dtype == "float16"
            and node.meta.get("precision") == "mixed"
            and node.id in forward
            and node.inputs[0].op == "softmax"
            and node.inputs[0].dtype == "float32"
            and node.inputs[0].id in forward
        ):
            halves.setdefault(node.inputs[0].id, node)
    if not halves:
        return list(nodes), list(roots)
    widened: dict[int, Node] = {}
    rebuilt: dict[int, Node] = {}
    ordered: list[Node] = []
    for node in nodes:
        if node.id in forward:
            rebuilt[node.id] = node
            ordered.append(node)
            continue
        inputs: list[Node] = []
        for i in node.inputs:
            if i.id not in halves:
                inputs.append(rebuilt[i.id])
                continue
            wide = widened.get(i.id)
            if wide is None:
                half = halves[i.id]
                meta = {**half.meta, "role": "gradient"}
                wide = Node(
                    half.graph,
                    "cast",
                    (half,),
                    {"dtype": "float32"},
                    i.type,
                    f"{i.name}_from_float16",
                    half.location,
                    meta,
                )
                widened[i.id] = wide
                ordered.append(wide)  # right before its first reader
            inputs.append(wide)
        rebuilt[node.id] = node.with_inputs(inputs)
        ordered.append(rebuilt[node.id])
    return ordered, [rebuilt[r.id] for r in roots]
