"""Kernel fusion: a chain of elementwise ops becomes one generated kernel.

While a plan is built, a node that the plan inlines into its users
(:func:`asgrad.gpu.plan.inlined_nodes`) is not launched: an elementwise node becomes a
:class:`Deferred` expression that its users inline in place of their input, a
broadcast or a view passes its input on (the user broadcasts it), a transpose becomes
a strided :class:`~asgrad.gpu.array.Operand`. The fused kernel reads only the chain's
leaves (broadcast through strides as usual) and writes only its end, so
``sigmoid(x @ w + b)``'s add and sigmoid, or an optimizer's whole update rule, are
one dispatch and no intermediate buffer. A deferred node holds its inputs, which keeps
their buffers alive (pool release is driven by garbage collection) until it is used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from asgrad.gpu.array import GpuArray, Operand
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import lower
from asgrad.gpu.lowering.elementwise import (
    EXPRESSION_OPS,
    elementwise,
    expression,
    max_inputs,
)
from asgrad.gpu.lowering.linalg import MAX_BATCH_DIMS, MatrixView, matmul
from asgrad.gpu.source import numpy_dtype, wgsl_type
from asgrad.tensor import TensorType
from asgrad.tensor.graph import Node

__all__ = [
    "INLINE_OPS",
    "VIEW_OPS",
    "Deferred",
    "Product",
    "Value",
    "emit",
    "fused_expression",
    "lower_in_place",
    "lower_node",
    "materialize",
    "sums_batch",
]

# Ops whose result aliases their input's buffer.
VIEW_OPS = frozenset({"reshape", "reshape_like", "expand_dims", "squeeze", "sum_to_like"})
# Ops a fused kernel can absorb: elementwise expressions, and broadcasts/transposes,
# which become strided reads of their input.
INLINE_OPS = EXPRESSION_OPS | {"broadcast_to", "broadcast_like", "transpose"}

_OPERAND = re.compile(r"\bx(\d+)\b")
# Longer fused expressions (recomputed values nest) launch their deferred inputs first.
MAX_EXPRESSION = 4000


@dataclass
class Product:
    """A batched matmul not yet launched: its user sums it over the batch axes."""

    a: GpuArray | Operand
    b: GpuArray | Operand

    @property
    def wgsl(self) -> str:
        return "f32"


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


Value = GpuArray | Operand | Deferred | Product
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

    None when the leaves would exceed the kernel's bindings (:func:`max_inputs`).
    """
    leaves: list[Leaf] = []

    def build(template: str, values: list[Value]) -> str:
        parts: list[str] = []
        for value in values:
            if isinstance(value, Deferred):
                parts.append(f"({build(value.expr, value.inputs)})")
                continue
            if isinstance(value, Product):
                value = materialize(value)
            for k, leaf in enumerate(leaves):
                if _same_leaf(leaf, value):
                    parts.append(f"x{k}")
                    break
            else:
                leaves.append(value)
                parts.append(f"x{len(leaves) - 1}")
        return _OPERAND.sub(lambda m: parts[int(m.group(1))], template)

    full = build(expr, inputs)
    if len(leaves) > max_inputs(full):
        return None
    return full, leaves


def materialize(value: Value) -> GpuArray:
    """An array holding ``value``: a deferred expression or a view is launched."""
    if isinstance(value, GpuArray):
        return value
    if isinstance(value, Operand):
        return elementwise("x0", [value], value.array.dtype, value.shape)
    if isinstance(value, Product):
        return matmul(_matrix(value.a), _matrix(value.b))
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


def _wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


def lower_node(node: Node, ins: list[Value], out_type: TensorType, inline: bool) -> Value:
    """The value of ``node`` from its inputs' values: launched, or with ``inline``
    deferred into its users (an expression, a passed-on input, a strided view)."""
    if inline and node.op in VIEW_OPS:
        return ins[0]  # shapes differ by leading 1s only: broadcasting realigns them
    if node.op in EXPRESSION_OPS:
        expr = expression(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
        assert expr is not None
        if inline:
            return Deferred(expr, ins, out_type, node.attrs)
        return emit(expr, ins, out_type)
    if inline and node.op in ("broadcast_to", "broadcast_like"):
        return ins[0]  # the user broadcasts it
    if inline and node.op == "transpose":
        source = ins[0] if isinstance(ins[0], Operand) else materialize(ins[0])
        return Operand.of(source).permute(tuple(node.attrs["axes"]))
    if node.op == "matmul":
        a, b = (v if _matrix_like(v) else materialize(v) for v in ins)
        if inline:
            return Product(a, b)
        return matmul(_matrix(a), _matrix(b))
    if isinstance(ins[0], Product):
        folded = _folded_product(ins[0], out_type)
        if folded is not None:
            return folded
    return lower(node.op, [materialize(v) for v in ins], node.attrs, out_type)


def _matrix_like(v: Value) -> TypeGuard[GpuArray | Operand]:
    """An array, or a view the matmul kernels read: one of the matrix axes unit-strided
    and at most their batch axes."""
    if isinstance(v, GpuArray):
        return True
    if not isinstance(v, Operand) or len(v.shape) < 2 or len(v.shape) - 2 > MAX_BATCH_DIMS:
        return False
    return 1 in (v.strides[-1], v.strides[-2])


def _matrix(v: GpuArray | Operand) -> GpuArray | MatrixView:
    if isinstance(v, Operand):
        return MatrixView(v.array, v.shape, v.strides, v.offset)
    return v


def sums_batch(product: Node, user: Node, types: Mapping[int, TensorType]) -> bool:
    """Whether ``user`` sums the batched matmul ``product`` over exactly its batch
    axes (``sum_to_like`` or ``sum`` to its (M, N), leading 1s aside)."""
    shape = types[product.id].shape
    if len(shape) < 3:
        return False
    batch, mn = shape[:-2], shape[-2:]
    out = types[user.id].shape
    if user.op == "sum_to_like":
        like = out
    elif user.op == "sum":
        axis = user.attrs.get("axis")
        if axis is None:
            return False
        axes = sorted(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))
        if axes != list(range(len(batch))):
            return False
        like = (1,) * len(batch) + tuple(mn) if user.attrs.get("keepdims") else tuple(mn)
    else:
        return False
    return (
        types[user.id].dtype == "float32"
        and len(like) >= 2
        and tuple(like[-2:]) == tuple(mn)
        and all(d == 1 for d in like[:-2])
        and tuple(out) == tuple(like)
        and math.prod(batch) > 1
    )


def _folded_product(p: Product, out_type: TensorType) -> GpuArray | None:
    """``sum over the batch of a_b @ b_b`` as one matmul, ``[a_0 a_1 ..] @ [b_0; b_1; ..]``:
    the batch axes folded into K. None when an operand's strides cannot fold (a
    broadcast batch axis, a layout that is not batch-major over K)."""
    a, b = Operand.of(p.a), Operand.of(p.b)
    if len(a.shape) != len(b.shape) or a.shape[:-2] != b.shape[:-2]:
        return None
    k = a.shape[-1]
    a_axes = [*zip(a.shape[:-2], a.strides[:-2], strict=True), (k, a.strides[-1])]
    b_axes = [*zip(b.shape[:-2], b.strides[:-2], strict=True), (k, b.strides[-2])]
    sa, sb = _merged_stride(a_axes), _merged_stride(b_axes)
    if sa is None or sb is None:
        return None
    total = math.prod(a.shape[:-2]) * k
    m, n = a.shape[-2], b.shape[-1]
    va = MatrixView(a.array, (m, total), (a.strides[-2], sa), a.offset)
    vb = MatrixView(b.array, (total, n), (sb, b.strides[-1]), b.offset)
    return matmul(va, vb).view(tuple(out_type.shape))


def _merged_stride(axes: list[tuple[int, int]]) -> int | None:
    """The stride of ``axes`` (size, stride pairs, outer first) walked as one axis."""
    stride = axes[-1][1]
    expected = stride
    for size, st in reversed(axes):
        if size != 1 and st != expected:
            return None
        expected *= size
    return stride if stride > 0 else None


def lower_in_place(node: Node, ins: list[Value], out_type: TensorType, target: GpuArray) -> Value:
    """An update rule (an elementwise node) written straight into its variable's buffer."""
    expr = expression(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
    assert expr is not None
    try:
        return emit(expr, ins, out_type, target)
    except GpuUnsupportedError:  # the old value is read other than element-wise
        return emit(expr, ins, out_type)
