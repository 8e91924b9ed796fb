"""Values a plan passes between nodes without launching them.

An inlined node's value is not always an array: an elementwise node is a
`Deferred` expression, a view is an `Operand` (strides
over its input's buffer) or a `Reshaped` one, a batched matmul summed over its
batch axes is a `Product`, a sum of scatter_slices is `Scattered`, a row program
whose elementwise reader takes it into its kernel is `Rows`. Each
becomes an array only where a kernel needs one (`asgrad.gpu.plan.fusion.materialize`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.source import numpy_dtype, wgsl_type
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.rows import RowProgram
from asgrad.tensor.ir.scalar import Expr, arg

__all__ = [
    "Deferred",
    "Leaf",
    "Partial",
    "Product",
    "Reshaped",
    "Rows",
    "Scattered",
    "Summed",
    "Value",
    "strided_reshape",
    "sums_batch",
]


@dataclass
class Product:
    """A matmul not yet launched: its user sums it over the batch axes (one product
    with the batch folded into K), or its elementwise user's kernel becomes the
    product's epilogue (`asgrad.gpu.plan.fusion.emit`). A ``shared`` product is
    read by other kernels too: the epilogue's kernel stores it as well, and ``array``
    holds it once launched, for every later reader."""

    a: GpuArray | Operand
    b: GpuArray | Operand
    shared: bool = False
    array: GpuArray | None = None

    @property
    def wgsl(self) -> str:
        """The storage type of the product: its operands' (f32 or f16)."""
        return Operand.of(self.a).array.wgsl


@dataclass
class Deferred:
    """An elementwise node not yet launched: its scalar expression (over ``arg(k)``,
    the value ``inputs[k]``) and its input values."""

    expr: Expr
    inputs: list[Value]
    type: TensorType
    attrs: Mapping[str, Any] = field(default_factory=dict)
    # levels of scalar nodes from its expression down through its deferred inputs
    depth: int = 0
    # read by other kernels after the row kernel that takes it as a prologue: that
    # kernel stores it (`asgrad.gpu.plan.fusion_rows`), and ``array`` holds it once
    # launched, for every later reader
    keep: bool = False
    array: GpuArray | None = None

    @property
    def wgsl(self) -> str:
        """The WGSL storage type of its value."""
        return wgsl_type(numpy_dtype(self.type.dtype))


@dataclass
class Scattered:
    """A sum of scatter_slices not yet launched (a slice's gradient, e.g. attention's
    q, k and v from one qkv): each piece written into its region of zeros."""

    type: TensorType
    pieces: list[tuple[tuple[Any, ...], Value]]

    @property
    def wgsl(self) -> str:
        return wgsl_type(numpy_dtype(self.type.dtype))


@dataclass
class Reshaped:
    """A reshape of a strided view that strides cannot express (attention's heads
    merged back): copied where it is read, or written through a reshaped destination."""

    operand: Operand
    shape: tuple[int, ...]
    array: GpuArray | None = None  # the copy, once made (every later reader reads it)

    @property
    def wgsl(self) -> str:
        return self.operand.array.wgsl


@dataclass(eq=False)
class Rows:
    """A row program (softmax, layer norm...: ``OpDef.rows``) not yet launched: the
    elementwise kernel reading it runs as the row kernel's output expression
    (`asgrad.gpu.plan.fusion_rows`). ``array`` holds it once launched on its own."""

    program: RowProgram
    inputs: list[Value]
    type: TensorType
    kind: str  # the dispatch's label (`asgrad.gpu.plan.dispatch_kinds`)
    array: GpuArray | None = None
    # a reduction: one value per row (``type`` its shape, rows over ``full``'s elements)
    full: tuple[int, ...] | None = None
    base: Rows | None = None  # the value this one reshapes (launched as that one)
    # read by other kernels too: the first kernel whose output expression reads it
    # stores it beside its output, and ``array`` holds it for the others
    keep: bool = False

    def reshaped(self, t: TensorType) -> Rows:
        """This reduction seen with the type ``t`` (size-1 axes added or removed)."""
        return Rows(self.program, self.inputs, t, self.kind, None, self.full, self.base or self)

    @property
    def wgsl(self) -> str:
        return "f32"


@dataclass(eq=False)
class Partial:
    """A column sum as partial sums: ``arena[offset + c * size + i]`` for each chunk c."""

    arena: GpuArray
    offset: int
    chunks: int
    size: int
    shape: tuple[int, ...]  # of one sum: its input's trailing axes


@dataclass(eq=False)
class Summed:
    """A sum an update batch adds up as it reads it: a bias's gradient (a column sum)
    or a weight's (a product whose K is split), held as float32 partial sums
    (`Partial`). The batch's update rules and the checks of the gradients
    (`asgrad.gpu.plan.multi_finite`) read each element as the sum of its partials,
    rounded to float16 where the value is float16 (the float16 sum and product
    accumulate in float32 and round once); any other reader launches the sum
    (``array``). ``launch`` launches the partial sums when they are not yet
    (column sums wait to be launched together)."""

    type: TensorType
    partial: Partial | None = None
    launch: Callable[[], None] | None = None
    array: GpuArray | None = None

    def partials(self) -> Partial:
        """The partial sums, launched first when they are not yet."""
        if self.partial is None and self.launch is not None:
            self.launch()
        assert self.partial is not None, "a Summed value's partial sums were never launched"
        return self.partial

    @property
    def size(self) -> int:
        return math.prod(self.type.shape)

    @property
    def wgsl(self) -> str:
        return wgsl_type(numpy_dtype(self.type.dtype))


Value = GpuArray | Operand | Deferred | Product | Scattered | Reshaped | Rows | Summed


# The expression of a float add: a sum of scatter_slices is written piece by piece.
SUM = arg(0) + arg(1)


Leaf = GpuArray | Operand


def _scatter_pieces(value: Value) -> Scattered | None:
    """``value`` as one scatter of disjoint pieces: a Scattered, or a Deferred sum of
    them; None otherwise."""
    if isinstance(value, Scattered):
        return value
    if not isinstance(value, Deferred) or value.expr != SUM:
        return None
    parts = [_scatter_pieces(v) for v in value.inputs]
    if parts[0] is None or parts[1] is None or parts[0].type != parts[1].type:
        return None
    pieces = parts[0].pieces + parts[1].pieces
    boxes = [_box(index, parts[0].type.shape) for index, _ in pieces]
    for i, a in enumerate(boxes):
        for b in boxes[:i]:
            if a is None or b is None or not _disjoint(a, b):
                return None
    return Scattered(parts[0].type, pieces)


def _box(index: tuple[Any, ...], shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    box = []
    for d, size in enumerate(shape):
        item = index[d] if d < len(index) else slice(None)
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step != 1:
                return None
            box.append((start, stop))
        else:
            i = int(item) % size
            box.append((i, i + 1))
    return box


def _disjoint(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(max(x[0], y[0]) >= min(x[1], y[1]) for x, y in zip(a, b, strict=True))


def _core(shape: tuple[int, ...]) -> tuple[int, ...]:
    dims = list(shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return tuple(dims)


def strided_reshape(op: Operand, shape: tuple[int, ...]) -> Operand | None:
    """``op`` seen with ``shape`` through strides, or None where that needs a copy
    (merged axes that are not laid out one after the other), as numpy decides."""
    if math.prod(op.shape) != math.prod(shape) or math.prod(shape) == 0:
        return None
    old = [(size, st) for size, st in zip(op.shape, op.strides, strict=True) if size != 1]
    strides = [0] * len(shape)
    oi = ni = 0
    while ni < len(shape):
        if shape[ni] == 1:
            ni += 1
            continue
        if oi >= len(old):
            return None
        o_size, n_size, oj, nj = old[oi][0], shape[ni], oi + 1, ni + 1
        while o_size != n_size:
            if o_size < n_size:
                if oj >= len(old):
                    return None
                o_size, oj = o_size * old[oj][0], oj + 1
            else:
                if nj >= len(shape):
                    return None
                n_size, nj = n_size * shape[nj], nj + 1
        if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(oi, oj - 1)):
            return None
        stride = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            strides[k] = stride
            stride *= shape[k]
        oi, ni = oj, nj
    if oi != len(old):
        return None
    return Operand(op.array, shape, tuple(strides), op.offset)


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
        axes = sorted(a % len(shape) for a in user.attrs["axis"])
        if axes != list(range(len(batch))):
            return False
        like = (1,) * len(batch) + tuple(mn) if user.attrs["keepdims"] else tuple(mn)
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


def _merged_stride(axes: list[tuple[int, int]]) -> int | None:
    """The stride of ``axes`` (size, stride pairs, outer first) walked as one axis."""
    stride = axes[-1][1]
    expected = stride
    for size, st in reversed(axes):
        if size != 1 and st != expected:
            return None
        expected *= size
    return stride if stride > 0 else None
