"""A graph's structure as a hashable key: two graphs with equal keys compile to the same
program (the same ops, attributes, constants, input names and types, the same variables,
outputs and updates), so a program compiled for one serves the other.

What makes the define-by-run habit (rebuilding the graph inside the training loop) cost a
key instead of a compile: [`Optimizer.compile`][asgrad.nn.Optimizer.compile] looks its
programs up by it.

>>> from asgrad.tensor import Graph
>>> def build():
...     g = Graph()
...     x = g.input("x", (2,))
...     return (x * 2.0).sum()
>>> structure_key([build()], {}) == structure_key([build()], {})
True
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.ir.variables import Variable

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

__all__ = ["structure_key"]


class _OpaqueError(Exception):
    """An attribute this key cannot describe (a loop body): no key."""


def _value(v: object) -> Hashable:
    if v is None or isinstance(v, bool | int | float | str | np.generic):
        return (type(v).__name__, v)
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, Variable):
        return ("variable", id(v))  # the program reads and writes this very object
    if isinstance(v, slice):
        return ("slice", _value(v.start), _value(v.stop), _value(v.step))
    if isinstance(v, tuple | list):
        return (type(v).__name__, tuple(_value(i) for i in v))
    if isinstance(v, Mapping):
        return ("map", tuple(sorted((str(k), _value(i)) for k, i in v.items())))
    if isinstance(v, np.dtype):
        return ("dtype", v.str)
    raise _OpaqueError(type(v).__name__)


def structure_key(outputs: Sequence[Tensor], updates: Mapping[Variable, Tensor]) -> Hashable:
    """The structure of ``outputs``' graph with ``updates``, or None where an attribute
    cannot be described (a graph with a loop body): such a graph has no key."""
    if not outputs:
        return None
    graph = outputs[0].graph
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    try:
        nodes = tuple(
            (
                n.op,
                n.name if n.op == "input" else None,
                n.type.shape,
                n.type.dtype,
                tuple(index[id(i)] for i in n.inputs),
                tuple(sorted((k, _value(v)) for k, v in n.attrs.items())),
            )
            for n in graph.nodes
        )
    except (_OpaqueError, KeyError):  # KeyError: a node of another graph
        return None
    outs = tuple(index.get(id(t.node), -1) for t in outputs)
    ups = tuple((id(v), index.get(id(t.node), -1)) for v, t in updates.items())
    if -1 in outs or any(i == -1 for _, i in ups):
        return None
    return (nodes, outs, ups)
