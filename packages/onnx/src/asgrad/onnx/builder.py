"""``OnnxBuilder``: collects ONNX nodes and constants through ``onnx.helper``.

The exporters of `asgrad.onnx.export_ops` and `asgrad.onnx.export_nn` call
it to append nodes; each returns the name of the value it made. Names are unique in
the model: a clash gets a ``_2``, ``_3``... suffix.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from asgrad.tensor import Node

__all__ = ["DTYPE_TO_ONNX", "ONNX_TO_DTYPE", "OnnxBuilder"]

DTYPE_TO_ONNX: dict[str, int] = {
    "float32": onnx.TensorProto.FLOAT,
    "float64": onnx.TensorProto.DOUBLE,
    "int32": onnx.TensorProto.INT32,
    "int64": onnx.TensorProto.INT64,
    "bool": onnx.TensorProto.BOOL,
}
ONNX_TO_DTYPE: dict[int, str] = {v: k for k, v in DTYPE_TO_ONNX.items()}


class OnnxBuilder:
    """The nodes of one ONNX graph under construction, for opset ``opset``."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self._names: set[str] = set()
        self.node: Node | None = None  # the asgrad node being exported, for doc strings
        self.parts: dict[int, list[str]] = {}  # a multi-output node's outputs, by node id

    def nested(self) -> OnnxBuilder:
        """A builder for a subgraph (a loop body): its own nodes, the same names."""
        sub = OnnxBuilder(self.opset)
        sub._names = self._names
        sub.parts = self.parts
        return sub

    def fresh(self, hint: str) -> str:
        """A value name not used yet: ``hint``, else ``hint_2``, ``hint_3``..."""
        for k in itertools.count(1):
            name = hint if k == 1 else f"{hint}_{k}"
            if name not in self._names:
                self._names.add(name)
                return name
        raise AssertionError("unreachable")  # pragma: no cover

    def reserve(self, name: str) -> None:
        """Mark ``name`` (an input's, an initializer's) as taken."""
        self._names.add(name)

    def op(
        self, op_type: str, inputs: Sequence[str], *, out: str | None = None, **attrs: Any
    ) -> str:
        """Append one ``op_type`` node; its output's name (``out``, or a fresh one)."""
        hint = self.node.name if self.node is not None else op_type.lower()
        output = out if out is not None else self.fresh(hint)
        location = self.node.location if self.node is not None else ""
        doc = f"asgrad {self.node.op} at {location}" if self.node is not None else None
        kept = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            helper.make_node(
                op_type,
                list(inputs),
                [output],
                name=self.fresh(f"{hint}/{op_type}"),
                doc_string=doc,
                **kept,
            )
        )
        return output

    def ops(self, op_type: str, inputs: Sequence[str], count: int, **attrs: Any) -> list[str]:
        """Append one ``op_type`` node with ``count`` outputs; their names."""
        hint = self.node.name if self.node is not None else op_type.lower()
        outputs = [self.fresh(hint) for _ in range(count)]
        location = self.node.location if self.node is not None else ""
        doc = f"asgrad {self.node.op} at {location}" if self.node is not None else None
        self.nodes.append(
            helper.make_node(
                op_type,
                list(inputs),
                outputs,
                name=self.fresh(f"{hint}/{op_type}"),
                doc_string=doc,
                **{k: v for k, v in attrs.items() if v is not None},
            )
        )
        return outputs

    def const(self, value: object, dtype: str, hint: str = "const") -> str:
        """A ``Constant`` node holding ``value`` as ``dtype``."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        tensor = numpy_helper.from_array(array, name=name)
        self.nodes.append(
            helper.make_node(
                "Constant", [], [name], name=self.fresh(f"{name}/Constant"), value=tensor
            )
        )
        return name

    def ints(self, values: Sequence[int], hint: str = "shape") -> str:
        """A 1-D int64 constant (shapes, axes, pads given as inputs)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), "int64", hint)

    def scalar(self, value: float, like: Node) -> str:
        """A rank-0 constant of ``like``'s dtype."""
        return self.const(value, like.dtype, "scalar")

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool) -> str:
        """``op_type`` (ReduceSum, ReduceMean...) over ``axes``, as the opset spells it.

        ReduceSum takes its axes as an input from opset 13, the others from opset 18.
        Empty ``axes`` reduce nothing (an Identity), as in asgrad.
        """
        if not axes:
            return self.op("Identity", [x])
        keep = int(bool(keepdims))
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, [x, self.ints(axes, "axes")], keepdims=keep)
        return self.op(op_type, [x], axes=list(axes), keepdims=keep)
