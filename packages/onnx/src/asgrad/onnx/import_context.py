"""What the importers share: the graph being built, and values known at load time.

An ONNX value is either a graph [`Tensor`][asgrad.tensor.Tensor] or a `Static`
array known while the graph is built (a constant, a shape and what is computed
from it). ``Static.dynamic`` marks entries that came from a value's leading (batch)
axis, so that a ``Reshape`` keeps that entry ``-1`` instead of the declared size;
``Static.origins`` names, for each entry of a ``Shape``, the tensor and axis it measured,
so that a ``ConstantOfShape`` follows the sizes of free axes when the graph runs.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from asgrad.onnx.errors import OnnxConstantRequiredError
from asgrad.tensor import Graph, Node, Tensor, evaluate

__all__ = ["ImportContext", "Importer", "RunNodes", "Static", "Value"]


@dataclass(frozen=True)
class Static:
    """An array known at load time; ``dynamic`` (same shape, or None) marks batch sizes;
    ``origins`` (same shape, of objects, or None) holds ``(tensor, axis)`` for an entry
    that is the size of that tensor's axis (a ``Shape``'s), else None; ``follows``: the
    same values computed when the graph runs, at the sizes of free axes fed (what a
    tensor input of an op gets), or None."""

    value: np.ndarray
    dynamic: np.ndarray | None = None
    origins: np.ndarray | None = None
    follows: Tensor | None = None

    def mask(self) -> np.ndarray:
        """``dynamic``, or all False."""
        if self.dynamic is None:
            return np.zeros(self.value.shape, dtype=bool)
        return self.dynamic

    def sources(self) -> np.ndarray:
        """``origins``, or all None."""
        if self.origins is None:
            return np.full(self.value.shape, None, dtype=object)
        return self.origins


Value = Tensor | Static


class ImportContext:
    """The graph the importers append to, the model's opset, and ``run``, which
    builds a list of nodes (a loop body's) into a context's graph."""

    def __init__(self, graph: Graph, opset: int, run: RunNodes) -> None:
        self.graph = graph
        self.opset = opset
        self.run = run
        self.env: MutableMapping[str, Value] = {}  # the values by name, set by ``run``

    def within(self, graph: Graph) -> ImportContext:
        """A context appending to ``graph`` (a loop body's) instead."""
        return ImportContext(graph, self.opset, self.run)

    def tensor(self, value: Value) -> Tensor:
        """``value`` as a graph tensor (a `Static` becomes a constant)."""
        if isinstance(value, Tensor):
            return value
        if value.follows is not None and value.follows.graph is self.graph:
            return value.follows
        array = np.asarray(value.value)
        return self.graph.constant(array, dtype=array.dtype.name)

    def static(self, value: Value, what: str) -> np.ndarray:
        """The value of ``value`` now: a `Static`, or a tensor computed from
        constants and initializers only (evaluated here); raises
        [`OnnxConstantRequiredError`][asgrad.onnx.OnnxConstantRequiredError] naming the model inputs
        it comes from."""
        if isinstance(value, Static):
            return np.asarray(value.value)
        node = value.node
        if node.op == "constant":
            return np.asarray(node.attrs["value"])
        if node.op == "parameter":  # an initializer read as a setting (Clip's bounds)
            return np.asarray(node.attrs["variable"].value)
        sources = _graph_inputs(node)
        if not sources:  # computed from constants and initializers only: fold it now
            return np.asarray(evaluate([value])[0])
        given = ", ".join(f"{n!r}: ..." for n in sources)
        raise OnnxConstantRequiredError(
            f"{what} must be known when the model is loaded; it comes from the model"
            f" input(s) {list(sources)}: give their values as load(..., constants={{{given}}})",
            inputs=sources,
        )

    def statics(self, values: list[Value]) -> bool:
        """Whether every one of ``values`` is known at load time."""
        return all(isinstance(v, Static) for v in values)


def _graph_inputs(node: Node) -> tuple[str, ...]:
    """The names of the graph inputs ``node`` is computed from, in graph order."""
    seen: set[int] = set()
    found: dict[int, str] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op == "input":
            found[n.id] = n.name
        stack.extend(n.inputs)
    return tuple(found[k] for k in sorted(found))


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes as Python values (strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


Importer = Callable[[ImportContext, onnx.NodeProto, list[Value]], list[Value]]
RunNodes = Callable[[ImportContext, Sequence[onnx.NodeProto], MutableMapping[str, Value]], None]
