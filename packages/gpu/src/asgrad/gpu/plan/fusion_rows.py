"""Row kernels with prologues and epilogues: elementwise chains rendered into the loads
and the store of a row program's kernel.

A row program (`asgrad.tensor.ir.rows`: softmax, log-softmax, layer and batch norm and
their input gradients) reads its element inputs in each pass over a row and writes
one output expression. A plan composes it with the elementwise chains around it, from
their expressions (`asgrad.tensor.ir.scalar.Expr`), never per pair of ops:

- **prologue**: an element input that is a `Deferred` chain (layer norm of a residual
  sum ``x + f(x) + b``) is replaced by the chain's expression over its leaves, each
  leaf a new input of the program, so the chain is computed as the row is read; a
  chain other kernels read too (``keep``) is stored by the row kernel beside its
  output, and they read that array;
- **epilogue**: an elementwise kernel of the program's shape whose leaf is a `Rows`
  value (a normalised value times a gradient) is the program's output expression,
  with its other leaves as new inputs.

A leaf becomes an input when the kernel can address it: the whole shape, contiguous
(``element``), or broadcast along the kept axes and contiguous over the reduced ones
(``position``: a bias along a layer norm's row), or the reverse (``row``). Any other
leaf is launched first (`materialize`), as before; then nothing is lost but the fusion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.rows import row_kernel_stores
from asgrad.gpu.plan.values import Deferred, Rows, Value
from asgrad.tensor import TensorType
from asgrad.tensor.ir.rows import Layout, RowBuilder, RowProgram, Stage
from asgrad.tensor.ir.scalar import Expr, arg, substitute

__all__ = [
    "ROW_REDUCTIONS",
    "can_host",
    "launch_rows",
    "layout_of",
    "reduction_axes",
    "reduction_rows",
    "rows_epilogue",
]


Read = Literal["element", "position", "row", "scalar"]


def layout_of(
    leaf: GpuArray | Operand, shape: tuple[int, ...], axes: tuple[int, ...]
) -> Read | None:
    """How a row kernel over ``shape`` reducing ``axes`` reads ``leaf`` (broadcast to
    ``shape``): at the element, at its position along the row, once per row, one value
    for all; None when it cannot address it (a strided view, another broadcast)."""
    op = Operand.of(leaf)
    if op.array.dtype != np.float32 or op.offset != 0:
        return None
    try:
        strides = op.broadcast_strides(shape)
    except GpuUnsupportedError:  # does not broadcast to the kernel's shape
        return None
    if math.prod(op.shape) == 1:
        return "scalar"
    kept = [d for d in range(len(shape)) if d not in axes]
    candidates: list[tuple[Layout, list[int]]] = [
        ("element", list(range(len(shape)))),
        ("position", list(axes)),
        ("row", kept),
    ]
    for layout, along in candidates:
        expected = [0] * len(shape)
        inner = contiguous_strides(tuple(shape[d] for d in along))
        for d, stride in zip(along, inner, strict=True):
            expected[d] = stride
        pairs = enumerate(zip(strides, expected, strict=True))
        fits = math.prod(shape[d] for d in along) <= op.array.size
        if fits and all(s == e or shape[d] == 1 for d, (s, e) in pairs):
            return layout
    return None


class _Inputs:
    """The composed program's inputs: arrays and their layouts, each read once."""

    def __init__(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
        self.shape, self.axes = shape, axes
        self.arrays: list[GpuArray] = []
        self.reads: list[Read] = []

    @property
    def layouts(self) -> tuple[Layout, ...]:
        """The program's input layouts (a scalar's is "row": the kernel reads it once)."""
        return tuple("row" if r == "scalar" else r for r in self.reads)

    @property
    def scalars(self) -> frozenset[int]:
        return frozenset(k for k, r in enumerate(self.reads) if r == "scalar")

    def add(self, array: GpuArray, read: Read) -> Expr:
        for k, (other, lay) in enumerate(zip(self.arrays, self.reads, strict=True)):
            if other is array and lay == read:
                return arg(k)
        self.arrays.append(array)
        self.reads.append(read)
        return arg(len(self.arrays) - 1)

    def leaf(self, value: Value) -> Expr | None:
        """``value`` (a leaf of a chain) as an input, or None when it cannot be one."""
        found = self.addressed(value)
        return None if found is None else self.add(*found)

    def addressed(self, value: Value) -> tuple[GpuArray, Read] | None:
        """The array and layout ``value`` is read through (launched first if it is an
        unlaunched product or program), or None."""
        from asgrad.gpu.plan.fusion import materialize

        if not isinstance(value, (GpuArray, Operand)):
            value = materialize(value)
        layout = layout_of(value, self.shape, self.axes)
        return None if layout is None else (Operand.of(value).array, layout)

    def chain(self, value: Deferred) -> Expr | None:
        """The expression of a deferred chain over inputs, or None, adding none (too
        many leaves, one the kernel cannot address, or not float32)."""
        from asgrad.gpu.plan.fusion import fused_expression

        if value.array is not None:
            return self.leaf(value.array)
        if value.wgsl != "f32" or tuple(value.type.shape) != self.shape:
            return None
        fused = fused_expression(value.expr, value.inputs)
        if fused is None:
            return None
        tree, leaves = fused
        if any(_launched_wgsl(v) != "f32" for v in leaves):
            return None
        found = [self.addressed(v) for v in leaves]
        if any(f is None for f in found):
            return None
        return substitute(tree, [self.add(*f) for f in found if f is not None])


def _launched_wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


@dataclass
class _Kernel:
    """A composed row program and what its kernel binds."""

    program: RowProgram
    arrays: list[GpuArray]
    scalars: frozenset[int]
    stores: tuple[Expr, ...]  # chains stored beside the output
    chains: list[Deferred]  # the values they are
    per_row: bool


def _compose(rows: Rows, epilogue: tuple[Expr, int, list[Value]] | None) -> _Kernel | None:
    """``rows``'s program with its deferred element inputs as prologues and
    ``epilogue`` (an expression over leaves, the ``host``-th being ``rows``) as its
    output, or None when a leaf cannot be an input."""
    from asgrad.gpu.plan.fusion import materialize

    program = rows.program
    shape = _full(rows)
    ins = _Inputs(shape, program.axes)
    mapped: list[Expr] = []
    stored: list[tuple[Expr, Deferred]] = []
    for layout, value in zip(program.inputs, rows.inputs, strict=True):
        e: Expr | None = None
        if layout == "element" and isinstance(value, Deferred):
            e = ins.chain(value)
            if e is not None and value.keep and value.array is None:
                stored.append((e, value))
        if e is None:
            array = materialize(value) if not isinstance(value, GpuArray) else value
            if layout == "element" and layout_of(array, shape, program.axes) != "element":
                return None
            e = ins.add(array, layout)
        mapped.append(e)
    out_args: list[Expr] = []
    if epilogue is not None:
        tree, host, leaves = epilogue
        for k, v in enumerate(leaves):
            if k == host:
                out_args.append(arg(0))  # replaced below
                continue
            e = ins.chain(v) if isinstance(v, Deferred) else ins.leaf(v)
            if e is None:
                return None
            out_args.append(e)
    n = len(ins.arrays)
    scalars = [arg(n + j) for j in range(len(program.stages))]
    args = [*mapped, *scalars]
    stages = tuple(Stage(s.reduce, substitute(s.expr, args)) for s in program.stages)
    out = substitute(program.out, args)
    if epilogue is not None:
        tree, host, _ = epilogue
        out_args[host] = out
        out = substitute(tree, out_args)
    composed = RowProgram(ins.layouts, program.axes, stages, out)
    stores = tuple(e for e, _ in stored)
    per_row = rows.full is not None and epilogue is None
    return _Kernel(composed, ins.arrays, ins.scalars, stores, [d for _, d in stored], per_row)


def _full(rows: Rows) -> tuple[int, ...]:
    """The shape of the elements ``rows`` reads."""
    return rows.full if rows.full is not None else tuple(rows.type.shape)


def launch_rows(rows: Rows) -> GpuArray:
    """``rows`` launched (once), its deferred element inputs as prologues."""
    if rows.base is not None:
        return launch_rows(rows.base).view(tuple(rows.type.shape))
    if rows.array is None:
        kernel = _compose(rows, None)
        assert kernel is not None  # without an epilogue every input can be launched
        rows.array = _run(rows, kernel).view(tuple(rows.type.shape))
    return rows.array


def rows_epilogue(tree: Expr, host: int, leaves: list[Value]) -> GpuArray | None:
    """The kernel of ``tree`` (over ``leaves``, the ``host``-th a `Rows` of the
    kernel's shape) launched as that row program's output expression, or None,
    launching nothing, when a leaf cannot be its input."""
    rows = leaves[host]
    assert isinstance(rows, Rows)
    kernel = _compose(rows, (tree, host, leaves))
    if kernel is None:
        return None
    return _run(rows, kernel)


def _run(rows: Rows, k: _Kernel) -> GpuArray:
    out, kept = row_kernel_stores(
        k.program, k.arrays, _full(rows), rows.kind, k.stores, k.scalars, k.per_row
    )
    for chain, array in zip(k.chains, kept, strict=True):
        chain.array = array
    return out


def can_host(rows: Rows, shape: tuple[int, ...]) -> bool:
    """Whether a kernel of ``shape`` reading ``rows`` can be its output expression: a
    program of that shape, or a reduction of its elements read broadcast along the row
    (its kept axes in place)."""
    full = _full(rows)
    if tuple(shape) != full:
        return False
    own = tuple(rows.type.shape)
    if rows.full is None:
        return own == full
    if len(own) > len(full):
        return False
    own = (1,) * (len(full) - len(own)) + own
    axes = rows.program.axes
    return own == tuple(1 if d in axes else n for d, n in enumerate(full))


# Reductions a row kernel computes (with the chains around it): NaN-propagating max and
# sum, as the reduction kernels; along at most this many elements a row (one workgroup).
ROW_REDUCTIONS = ("sum", "max")
MAX_ROW = 1 << 16


def reduction_axes(
    op: str, attrs: Mapping[str, Any], shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The axes a reduction ``op`` of ``shape`` reduces when a row kernel can: trailing
    axes of at most `MAX_ROW` elements, none empty; else None."""
    if op not in ROW_REDUCTIONS or not shape:
        return None
    axis = attrs.get("axis")
    axes = (
        tuple(range(len(shape)))
        if axis is None
        else (axis,)
        if isinstance(axis, int)
        else tuple(axis)
    )
    axes = tuple(sorted({a % len(shape) for a in axes}))
    if not axes or axes != tuple(range(len(shape) - len(axes), len(shape))):
        return None
    if math.prod(shape) == 0 or math.prod(shape[d] for d in axes) > MAX_ROW:
        return None
    return axes


def reduction_rows(
    op: str, x: Value, shape: tuple[int, ...], attrs: Mapping[str, Any], out: TensorType
) -> Rows | None:
    """A float32 reduction of ``x`` (of ``shape``) as a one-stage row program, or None
    when a row kernel cannot compute it (`reduction_axes`)."""
    axes = reduction_axes(op, attrs, shape)
    if axes is None or out.dtype != "float32" or _launched_wgsl(x) != "f32":
        return None
    builder = RowBuilder(("element",), axes)
    program = builder.program(builder.reduce(op, builder.input(0)))
    return Rows(program, [x], out, "reduction_row_program", full=tuple(shape))
