"""What the importers share: the graph being built, and values known at load time.

An ONNX value is either a graph [`Tensor`][asgrad.tensor.Tensor] or a `Static`
array known while the graph is built (a constant, a shape and what is computed
from it). ``Static.dynamic`` marks entries that came from a value's leading (batch)
axis, so that a ``Reshape`` keeps that entry ``-1`` instead of the declared size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from asgrad.onnx.errors import OnnxImportError
from asgrad.tensor import Graph, Tensor

__all__ = ["ImportContext", "Importer", "Static", "Value"]


@dataclass(frozen=True)
class Static:
    """An array known at load time; ``dynamic`` (same shape, or None) marks batch sizes."""

    value: np.ndarray
    dynamic: np.ndarray | None = None

    def mask(self) -> np.ndarray:
        """``dynamic``, or all False."""
        if self.dynamic is None:
            return np.zeros(self.value.shape, dtype=bool)
        return self.dynamic


Value = Tensor | Static


class ImportContext:
    """The graph the importers append to, and the model's opset."""

    def __init__(self, graph: Graph, opset: int) -> None:
        self.graph = graph
        self.opset = opset

    def tensor(self, value: Value) -> Tensor:
        """``value`` as a graph tensor (a `Static` becomes a constant)."""
        if isinstance(value, Tensor):
            return value
        array = np.asarray(value.value)
        return self.graph.constant(array, dtype=array.dtype.name)

    def static(self, value: Value, what: str) -> np.ndarray:
        """The value of ``value`` now; raises if it is only known when the graph runs."""
        if isinstance(value, Static):
            return np.asarray(value.value)
        node = value.node
        if node.op == "constant":
            return np.asarray(node.attrs["value"])
        if node.op == "parameter":  # an initializer read as a setting (Clip's bounds)
            return np.asarray(node.attrs["variable"].value)
        raise OnnxImportError(
            f"{what} must be known when the model is loaded (a constant or an initializer);"
            f" here it is computed by a {node.op} node"
        )

    def statics(self, values: list[Value]) -> bool:
        """Whether every one of ``values`` is known at load time."""
        return all(isinstance(v, Static) for v in values)


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes as Python values (strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


Importer = Callable[[ImportContext, onnx.NodeProto, list[Value]], list[Value]]
