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
  with its other leaves as new inputs;
- **reductions**: a sum or max over trailing axes is a one-stage program
  (`reduction_rows`), read broadcast by a kernel of its elements' shape (softmax's
  gradient ``y * (g - sum(g * y))``) or written once per row through a kernel of its
  own shape (a sum divided by a count);
- **inlined programs**: a `Rows` leaf of a chain over the same rows adds its stages to
  the kernel (cross-entropy's ``(log_softmax(z) * onehot).sum(-1)``);
- **siblings**: an elementwise kernel reading a program over the same rows is
  computed by an earlier row kernel and stored beside its output (a layer norm's
  backward computes its weight's gradient term; the plan picks them,
  `asgrad.gpu.plan.fusion_groups.row_siblings`).

A leaf becomes an input when the kernel can address it (`layout_of`): the whole
shape, contiguous (``element``), broadcast along the kept axes and contiguous over the
reduced ones (``position``: a bias along a layer norm's row), the reverse (``row``),
one value, or broadcast over leading axes and contiguous over the rest (read at the
element's index modulo their size: attention's mask over batch and heads). Any other
leaf is launched first (`materialize`), as before; then nothing is lost but the fusion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.rows import row_kernel_stores
from asgrad.gpu.plan.values import Deferred, Rows, Value
from asgrad.tensor import TensorType
from asgrad.tensor.ir.rows import Layout, RowBuilder, RowProgram, Stage, index
from asgrad.tensor.ir.scalar import Expr, arg, cast, substitute

__all__ = [
    "ROW_REDUCTIONS",
    "can_host",
    "launch_rows",
    "layout_of",
    "reduction_axes",
    "reduction_rows",
    "rows_epilogue",
]


# The storage a row kernel reads and writes: float16 read as stored (the expressions
# widen it where they compute in float32), each result converted as it is written.
_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))


# How a row kernel reads an input: a `Layout`, or at the element's flat index modulo a
# size (a broadcast over leading axes, contiguous over the others: attention's mask over
# the batch and heads, a position embedding over the batch; 1: one value for all).
Read = Layout | int


def layout_of(
    leaf: GpuArray | Operand, shape: tuple[int, ...], axes: tuple[int, ...]
) -> Read | None:
    """How a row kernel over ``shape`` reducing ``axes`` reads ``leaf`` (broadcast to
    ``shape``): at the element, at its position along the row, once per row, wrapped
    over leading axes (`Read`); None when it cannot address it (a strided view, another
    broadcast)."""
    op = Operand.of(leaf)
    if op.array.dtype not in _FLOATS or op.offset != 0:
        return None
    try:
        strides = op.broadcast_strides(shape)
    except GpuUnsupportedError:  # does not broadcast to the kernel's shape
        return None
    if math.prod(op.shape) == 1:
        return 1
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
    for lead in range(1, len(shape)):
        tail = shape[lead:]
        expected = [0] * lead + list(contiguous_strides(tail))
        pairs = enumerate(zip(strides, expected, strict=True))
        fits = math.prod(tail) <= op.array.size
        if fits and all(s == e or shape[d] == 1 for d, (s, e) in pairs):
            return math.prod(tail)
    return None


class _Inputs:
    """The composed program's inputs: arrays and their layouts, each read once."""

    def __init__(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
        self.shape, self.axes = shape, axes
        self.arrays: list[GpuArray] = []
        self.reads: list[Read] = []
        self.stages: list[Stage] = []
        # chains (and a kept program's value) other kernels read too
        self.stored: list[tuple[Expr, Deferred | Rows]] = []

    @property
    def layouts(self) -> tuple[Layout, ...]:
        """The program's input layouts (a wrapped input's is "element": the kernel
        reads it at the element, as `wrapped` says)."""
        return tuple("element" if isinstance(r, int) else r for r in self.reads)

    @property
    def wrapped(self) -> dict[int, int]:
        return {k: r for k, r in enumerate(self.reads) if isinstance(r, int)}

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

    def mark(self) -> tuple[int, int, int]:
        return len(self.arrays), len(self.stages), len(self.stored)

    def reset(self, mark: tuple[int, int, int]) -> None:
        """Forget what was added since ``mark`` (a chain that could not be read)."""
        del self.arrays[mark[0] :], self.reads[mark[0] :]
        del self.stages[mark[1] :], self.stored[mark[2] :]

    def chain(self, value: Deferred) -> Expr | None:
        """The expression of a deferred chain over inputs (of the chain's own kind: a
        float16 chain computes in f16 as its kernel would), or None, adding none (too
        many leaves, one the kernel cannot address, or not float32 or float16). A leaf
        that is an unlaunched row program over the same rows is inlined (`program`)."""
        from asgrad.gpu.plan.fusion import fused_expression

        if value.array is not None:
            return self.leaf(value.array)
        if value.wgsl not in ("f32", "f16") or tuple(value.type.shape) != self.shape:
            return None
        fused = fused_expression(value.expr, value.inputs)
        if fused is None:
            return None
        tree, leaves = fused
        if any(_launched_wgsl(v) not in ("f32", "f16") for v in leaves):
            return None
        e = self.substituted(tree, leaves)
        if e is None:
            return None
        if value.keep and all(d is not value for _, d in self.stored):
            self.stored.append((e, value))
        return e

    def row_leaf(self, value: Value, rows: Rows) -> Expr | None:
        """A leaf of a kernel of the reduction ``rows``'s own shape, read once per row:
        one value, or an array of that shape in order (launched first if it must be)."""
        from asgrad.gpu.plan.fusion import materialize

        leaf = value if isinstance(value, (GpuArray, Operand)) else materialize(value)
        op = Operand.of(leaf)
        if op.array.dtype not in _FLOATS or op.offset != 0:
            return None
        if math.prod(op.shape) == 1:
            return self.add(op.array, 1)
        own = tuple(rows.type.shape)
        try:
            strides = op.broadcast_strides(own)
        except GpuUnsupportedError:
            return None
        contiguous = contiguous_strides(own)
        if all(s == c or n == 1 for s, c, n in zip(strides, contiguous, own, strict=True)):
            return self.add(op.array, "row")
        return None

    def sibling(self, value: Deferred) -> Expr | None:
        """The expression of an elementwise kernel of this kernel's shape that reads
        an unlaunched row program over the same rows (inlined), or None, adding none."""
        from asgrad.gpu.plan.fusion import fused_expression

        if value.wgsl not in ("f32", "f16") or tuple(value.type.shape) != self.shape:
            return None
        fused = fused_expression(value.expr, value.inputs)
        if fused is None:
            return None
        tree, leaves = fused
        if not any(isinstance(v, Rows) and self.inlines(v) for v in leaves):
            return None
        return self.substituted(tree, leaves)

    def substituted(self, tree: Expr, leaves: Sequence[Value]) -> Expr | None:
        """``tree`` over ``leaves`` as this kernel reads them (a row program over the
        same rows inlined, any other leaf an input), or None, adding none."""
        start = self.mark()
        args: list[Expr] = []
        for v in leaves:
            e = self.program(v) if isinstance(v, Rows) and self.inlines(v) else None
            e = e if e is not None else self.leaf(v)
            if e is None:
                self.reset(start)
                return None
            args.append(e)
        return substitute(tree, args)

    def inlines(self, rows: Rows) -> bool:
        """Whether ``rows`` (unlaunched) reduces the same rows as this kernel, its
        value read at the element (or, for a reduction, once per row)."""
        return (
            rows.array is None
            and rows.base is None
            and rows.program.axes == self.axes
            and can_host(rows, self.shape)
        )

    def program(self, rows: Rows) -> Expr | None:
        """``rows``'s output expression, its stages added to this kernel's (its
        deferred element inputs as prologues), or None, adding nothing."""
        from asgrad.gpu.plan.fusion import materialize

        start = self.mark()
        mapped: list[Expr] = []
        for layout, value in zip(rows.program.inputs, rows.inputs, strict=True):
            e = self.chain(value) if layout == "element" and isinstance(value, Deferred) else None
            if e is None:
                array = materialize(value) if not isinstance(value, GpuArray) else value
                if layout == "element" and layout_of(array, self.shape, self.axes) != "element":
                    self.reset(start)
                    return None
                e = self.add(array, layout)
            # the program computes in float32: a float16 input widened (exactly)
            mapped.append(cast(e, "float32") if _launched_wgsl(value) == "f16" else e)
        base = len(self.stages)
        args = [*mapped, *(arg(_SCALARS + base + j) for j in range(len(rows.program.stages)))]
        for stage in rows.program.stages:
            self.stages.append(Stage(stage.reduce, substitute(stage.expr, args)))
        return substitute(rows.program.out, args)


# Stage j's row scalar is arg(_SCALARS + j) while a program is composed (the inputs
# come first in the end, and their number is known only then).
_SCALARS = 1 << 20


def _renumber(e: Expr, n: int, memo: dict[int, Expr]) -> Expr:
    """``e`` with each ``arg(_SCALARS + j)`` as ``arg(n + j)``."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if e.op == "arg":
        k = index(e)
        out = arg(n + k - _SCALARS) if k >= _SCALARS else e
    elif not e.args:
        out = e
    else:
        out = Expr(e.op, tuple(_renumber(a, n, memo) for a in e.args), e.value)
    memo[id(e)] = out
    return out


def _launched_wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


@dataclass
class _Kernel:
    """A composed row program and what its kernel binds."""

    program: RowProgram
    arrays: list[GpuArray]
    wrapped: dict[int, int]
    stores: tuple[Expr, ...]  # chains stored beside the output
    chains: list[Deferred | Rows]  # the values they are
    per_row: bool
    out_dtype: np.dtype[Any]  # the output's storage: float32, or float16 (an epilogue's)


def _compose(
    rows: Rows,
    epilogue: tuple[Expr, int, list[Value]] | None,
    siblings: Sequence[Deferred] = (),
    own: bool = False,
    out_dtype: np.dtype[Any] = _FLOATS[0],
    kept: Sequence[tuple[Expr, Deferred]] = (),
) -> _Kernel | None:
    """``rows``'s program with its deferred element inputs as prologues and
    ``epilogue`` (an expression over leaves, the ``host``-th being ``rows``) as its
    output, or None when a leaf cannot be an input. Each of ``siblings`` (an
    elementwise kernel reading another row program over the same rows) that it can
    compute is stored beside the output (``array`` holds it once launched). ``own``:
    the epilogue has the reduction ``rows``'s own shape (written once per row).
    ``kept``: subtrees of the epilogue (over its leaves) that other kernels read, of
    the kernel's shape: stored beside the output as well.
    """
    ins = _Inputs(_full(rows), rows.program.axes)
    out = ins.program(rows)
    if out is None:
        return None
    per_row = rows.full is not None and (epilogue is None or own)
    if rows.keep and epilogue is not None and not per_row and rows.full is None:
        ins.stored.append((out, rows))  # read by other kernels too: stored beside
    if epilogue is not None and per_row:  # a reader of the reduction's own shape
        tree, host, leaves = epilogue
        row_args: list[Expr] = []
        for k, v in enumerate(leaves):
            e = out if k == host else ins.row_leaf(v, rows)
            if e is None:
                return None
            row_args.append(e)
        out = substitute(tree, row_args)
    elif epilogue is not None:
        tree, host, leaves = epilogue
        out_args: list[Expr] = []
        for k, v in enumerate(leaves):
            e = out if k == host else ins.chain(v) if isinstance(v, Deferred) else None
            if e is None and isinstance(v, Rows) and ins.inlines(v):
                e = ins.program(v)
                if e is not None and v.keep and v.full is None:
                    ins.stored.append((e, v))  # a program of this shape others read
            e = e if e is not None else ins.leaf(v)
            if e is None:
                return None
            out_args.append(e)
        out = substitute(tree, out_args)
        for sub, value in kept:
            fits = tuple(value.type.shape) == ins.shape and value.wgsl in ("f32", "f16")
            if fits and all(d is not value for _, d in ins.stored):
                ins.stored.append((substitute(sub, out_args), value))
    for sibling in siblings:
        e = ins.sibling(sibling)
        if e is not None:
            ins.stored.append((e, sibling))
    n = len(ins.arrays)
    memo: dict[int, Expr] = {}
    stages = tuple(Stage(st.reduce, _renumber(st.expr, n, memo)) for st in ins.stages)
    composed = RowProgram(ins.layouts, rows.program.axes, stages, _renumber(out, n, memo))
    stored = [(e, d) for e, d in ins.stored if d.array is None]
    stores = tuple(_renumber(e, n, memo) for e, _ in stored)
    chains = [d for _, d in stored]
    return _Kernel(composed, ins.arrays, ins.wrapped, stores, chains, per_row, out_dtype)


def _full(rows: Rows) -> tuple[int, ...]:
    """The shape of the elements ``rows`` reads."""
    return rows.full if rows.full is not None else tuple(rows.type.shape)


def launch_rows(rows: Rows, siblings: Sequence[Deferred] = ()) -> GpuArray:
    """``rows`` launched (once), its deferred element inputs as prologues, with
    ``siblings`` it can compute stored beside it (see `_compose`)."""
    if rows.base is not None:
        return launch_rows(rows.base).view(tuple(rows.type.shape))
    if rows.array is None:
        kernel = _compose(rows, None, siblings)
        assert kernel is not None  # without an epilogue every input can be launched
        rows.array = _run(rows, kernel).view(tuple(rows.type.shape))
    return rows.array


def rows_epilogue(
    tree: Expr,
    host: int,
    leaves: list[Value],
    siblings: Sequence[Deferred] = (),
    own: bool = False,
    out_dtype: np.dtype[Any] = _FLOATS[0],
    kept: Sequence[tuple[Expr, Deferred]] = (),
) -> GpuArray | None:
    """The kernel of ``tree`` (over ``leaves``, the ``host``-th a `Rows` of the
    kernel's shape) launched as that row program's output expression, written as
    ``out_dtype`` (float32, or float16: a cast of a norm's output rounded as it is
    stored), or None, launching nothing, when a leaf cannot be its input
    (``siblings``, ``own``, ``kept``: see `_compose`)."""
    rows = leaves[host]
    assert isinstance(rows, Rows)
    kernel = _compose(rows, (tree, host, leaves), siblings, own, out_dtype, kept)
    if kernel is None:
        return None
    out = _run(rows, kernel)
    return out.view(tuple(rows.type.shape)) if kernel.per_row else out


def _run(rows: Rows, k: _Kernel) -> GpuArray:
    out, kept = row_kernel_stores(
        k.program,
        k.arrays,
        _full(rows),
        rows.kind,
        k.stores,
        k.wrapped,
        k.per_row,
        k.out_dtype,
        [np.dtype(np.float16) if d.wgsl == "f16" else np.dtype(np.float32) for d in k.chains],
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
