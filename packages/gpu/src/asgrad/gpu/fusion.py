"""Elementwise fusion: a chain of elementwise ops becomes one generated kernel.

While a plan is compiled, an elementwise node whose value has exactly one user, that
user elementwise of the same shape, is not launched: it becomes a :class:`Deferred`
expression that the user inlines in place of its input. The fused kernel reads only
the chain's leaves (broadcast through strides as usual) and writes only its end, so
``sigmoid(x @ w + b)``'s add and sigmoid, or an optimizer's whole update rule, are
one dispatch and no intermediate buffer. A deferred node holds its inputs, which keeps
their buffers alive (pool release is driven by garbage collection) until it is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asgrad.gpu.array import GpuArray, Operand
from asgrad.gpu.lowering.elementwise import MAX_INPUTS, elementwise
from asgrad.gpu.source import numpy_dtype, wgsl_type
from asgrad.tensor import TensorType

__all__ = ["Deferred", "Value", "fused_expression", "materialize"]

_OPERAND = re.compile(r"\bx(\d+)\b")
# Longer fused expressions (recomputed values nest) launch their deferred inputs first.
MAX_EXPRESSION = 4000


@dataclass
class Deferred:
    """An elementwise node not yet launched: its expression and its input values."""

    expr: str
    inputs: list[Value]
    type: TensorType
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def wgsl(self) -> str:
        """The WGSL storage type of its value."""
        return wgsl_type(numpy_dtype(self.type.dtype))


Value = GpuArray | Operand | Deferred
Leaf = GpuArray | Operand


def _same_leaf(a: Leaf, b: Leaf) -> bool:
    if isinstance(a, GpuArray) and isinstance(b, GpuArray):
        return a is b
    oa, ob = Operand.of(a), Operand.of(b)
    return (
        oa.array.buffer is ob.array.buffer
        and oa.shape == ob.shape
        and oa.strides == ob.strides
        and oa.offset == ob.offset
        and oa.array.dtype == ob.array.dtype
    )


def fused_expression(expr: str, inputs: list[Value]) -> tuple[str, list[Leaf]] | None:
    """``expr`` with deferred inputs inlined, and the leaves (arrays, views) it reads.

    None when the leaves would exceed the kernel's :data:`MAX_INPUTS` bindings.
    """
    leaves: list[Leaf] = []

    def build(template: str, values: list[Value]) -> str:
        parts: list[str] = []
        for value in values:
            if isinstance(value, Deferred):
                parts.append(f"({build(value.expr, value.inputs)})")
                continue
            for k, leaf in enumerate(leaves):
                if _same_leaf(leaf, value):
                    parts.append(f"x{k}")
                    break
            else:
                leaves.append(value)
                parts.append(f"x{len(leaves) - 1}")
        return _OPERAND.sub(lambda m: parts[int(m.group(1))], template)

    full = build(expr, inputs)
    if len(leaves) > MAX_INPUTS:
        return None
    return full, leaves


def materialize(value: Value) -> GpuArray:
    """An array holding ``value``: a deferred expression or a view is launched."""
    if isinstance(value, GpuArray):
        return value
    if isinstance(value, Operand):
        return elementwise("x0", [value], value.array.dtype, value.shape)
    return emit(value.expr, value.inputs, value.type)


def emit(
    expr: str, inputs: list[Value], out: TensorType, target: GpuArray | None = None
) -> GpuArray:
    """Launch ``expr`` over ``inputs`` as one kernel (into ``target`` when given),
    launching deferred inputs on their own first if there are too many leaves."""
    fused = fused_expression(expr, inputs)
    if fused is None or len(fused[0]) > MAX_EXPRESSION:
        # too many leaves for one kernel: launch the deferred inputs on their own first
        inputs = [materialize(v) for v in inputs]
        fused = fused_expression(expr, inputs)
        assert fused is not None
    full, leaves = fused
    if target is not None:
        return elementwise(full, leaves, out=Operand.of(target))
    return elementwise(full, leaves, numpy_dtype(out.dtype), out.shape)
