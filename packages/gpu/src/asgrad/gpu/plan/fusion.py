"""Kernel fusion: a chain of elementwise ops becomes one generated kernel.

While a plan is built, a node that the plan inlines into its users
(`asgrad.gpu.plan.inlined_nodes`) is not launched: an elementwise node becomes a
`Deferred` scalar expression (`asgrad.tensor.ir.scalar.Expr`) that its users
substitute for their input, a broadcast or a view passes its input on (the user
broadcasts it), a transpose becomes a strided `Operand`, a matmul a `Product`, a
row program (or a trailing reduction) read by one elementwise kernel a `Rows`
(`asgrad.gpu.plan.fusion_rows`).
The fused kernel's expression is one tree whose arguments are the chain's leaves
(read through strides as usual); it is simplified (shared subtrees computed once,
constants folded) and rendered to WGSL once (`asgrad.gpu.lowering.elementwise.elementwise_tree`).
It writes only the chain's end, so an optimizer's whole update rule is one dispatch and
no intermediate buffer; where a leaf is a product of the output's shape, the tree is
the matmul's epilogue, so ``gelu(x @ w + b)`` is one matmul dispatch. A deferred node
holds its inputs, which keeps their buffers alive (pool release is driven by garbage
collection) until it is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeGuard

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand, slice_view
from asgrad.gpu.device.source import numpy_dtype, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import lower
from asgrad.gpu.lowering.common import literal
from asgrad.gpu.lowering.elementwise import (
    CHECKED,
    EXPRESSION_OPS,
    MAX_INPUTS,
    elementwise,
    elementwise_tree,
    expression_tree,
)
from asgrad.gpu.lowering.linalg import (
    MAX_BATCH_DIMS,
    MAX_EPILOGUE_OPERANDS,
    Epilogue,
    MatrixView,
    choose,
    matmul,
    matmul_into,
    unsplit,
)
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.gpu.lowering.scalar import WGSL, height, typed
from asgrad.gpu.plan.fusion_rows import can_host, launch_rows, reduction_rows, rows_epilogue
from asgrad.gpu.plan.values import (
    SUM,
    Deferred,
    Leaf,
    Product,
    Reshaped,
    Rows,
    Scattered,
    Summed,
    Value,
    _box,
    _core,
    _merged_stride,
    _scatter_pieces,
    strided_reshape,
    sums_batch,
)
from asgrad.tensor import TensorType, get_op
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.scalar import Expr, arg, substitute

__all__ = [
    "INLINE_OPS",
    "LAZY_VIEWS",
    "LIKE_OPS",
    "MAX_DEPTH",
    "MAX_NODES",
    "ROW_OPS",
    "VIEW_OPS",
    "Deferred",
    "Product",
    "Reshaped",
    "Scattered",
    "Value",
    "emit",
    "fused_expression",
    "lower_in_place",
    "lower_node",
    "materialize",
    "product_into",
    "product_pieces",
    "strided_reshape",
    "sums_batch",
]


# Ops that are a row program (``OpDef.rows``), and what a plan's dispatch counts call
# their kernel (`asgrad.gpu.plan.dispatch_kinds`): launched by `fusion_rows`, with the
# chains around them.
ROW_OPS = {
    "softmax": "norm_softmax",
    "log_softmax": "norm_softmax",
    "layer_norm": "norm",
    "layer_norm_backward": "norm",
    "batch_norm": "norm",
    "batch_norm_backward": "norm",
}


# Ops whose result aliases their input's buffer.
VIEW_OPS = frozenset({"reshape", "reshape_like", "expand_dims", "squeeze", "sum_to_like"})


# Views a plan may pass on as strides (an Operand) instead of copying: a slice, and a
# reshape of a strided view where numpy's would need no copy either.
LAZY_VIEWS = frozenset({"slice", "reshape", "reshape_like", "expand_dims", "squeeze"})


# Ops some of whose inputs give only a shape: op -> their positions.
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "reshape_like": (1,),
    "broadcast_like": (1,),
    "sum_to_like": (1,),
    "scatter_slice": (1,),
    "scatter_add": (2,),
}


LIKE_OPS = frozenset(SHAPE_INPUTS)


# Ops a fused kernel can absorb: elementwise expressions, and broadcasts/transposes,
# which become strided reads of their input.
INLINE_OPS = EXPRESSION_OPS | {"broadcast_to", "broadcast_like", "transpose"}


# A batch-summed product is folded into one matmul when it is small (launches cost
# more than its arithmetic) or has enough 128x128 output tiles to fill a large GPU
# (the matmul kernels' own threshold); otherwise the few tiles would each walk the
# whole folded K while most of the GPU idles.
FOLD_MAX_WORK = 1 << 28  # multiply-adds
FOLD_MIN_TILES = 96


# A fused kernel computes at most this many distinct scalar nodes; a larger expression
# (recomputed values nest) launches its deferred inputs first.
MAX_NODES = 400


# An elementwise node whose expression would nest deeper than this many levels of
# scalar nodes (a long chain of ops) is launched rather than deferred: rendering recurses
# through the levels, and a kernel stays a size a driver compiles quickly.
MAX_DEPTH = 120


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


# A fused kernel's leaf: an array or a view, or a product or a row program its kernel
# may store, or a sum of partial sums (read by a multi-tensor update or check; any
# other kernel launches it).
FusedLeaf = Leaf | Product | Rows | Summed


def fused_expression(
    expr: Expr, inputs: list[Value], kept: list[tuple[Expr, Deferred]] | None = None
) -> tuple[Expr, list[FusedLeaf]] | None:
    """``expr`` (over ``arg(k)``: ``inputs[k]``) with every deferred input's
    expression substituted, and the leaves it reads (``arg(k)`` of the result: leaf
    k): arrays, views, and products not yet launched (`emit` stores one through the
    expression, materializes the others). A deferred value read twice is one subtree.
    ``kept`` collects the subtrees of the deferred values other kernels read too
    (``keep``, not yet stored): a row kernel computing the expression stores them.

    None when the leaves would exceed the kernel's bindings (`max_inputs`) or the
    expression `MAX_NODES`.
    """
    leaves: list[FusedLeaf] = []
    composed: dict[int, Expr] = {}

    def build(e: Expr, values: list[Value]) -> Expr:
        args: list[Expr] = []
        for value in values:
            scattered = _scatter_pieces(value)
            if scattered is not None:
                value = _write_pieces(scattered, scattered.type)
            if isinstance(value, Deferred) and value.array is not None:
                value = value.array  # stored by a row kernel that took it as a prologue
            if isinstance(value, Deferred):
                sub = composed.get(id(value))
                if sub is None:
                    inner = build(value.expr, value.inputs)
                    sub = composed[id(value)] = typed(inner, value.wgsl)
                    if kept is not None and value.keep:
                        kept.append((sub, value))
                args.append(sub)
                continue
            if isinstance(value, (Scattered, Reshaped)):
                value = materialize(value)
            if isinstance(value, (Product, Rows, Summed)) and value.array is not None:
                value = value.array  # launched by an earlier kernel
            args.append(arg(_leaf_index(leaves, value)))
        return substitute(e, args)

    full = build(expr, inputs)
    nodes = _nodes(full)
    if len(leaves) > MAX_INPUTS - _calls_checks(nodes) or len(nodes) > MAX_NODES:
        return None
    return full, leaves


def _leaf_index(leaves: list[FusedLeaf], value: FusedLeaf) -> int:
    for k, leaf in enumerate(leaves):
        if leaf is value or (
            not isinstance(leaf, (Product, Rows, Summed))
            and not isinstance(value, (Product, Rows, Summed))
            and _same_leaf(leaf, value)
        ):
            return k
    leaves.append(value)
    return len(leaves) - 1


def _nodes(e: Expr) -> list[Expr]:
    seen: set[int] = set()
    nodes: list[Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            nodes.append(node)
            stack.extend(node.args)
    return nodes


def _calls_checks(nodes: list[Expr]) -> bool:
    """Whether ``nodes`` call a checking function (their kernel binds the check slots)."""
    return any(n.op == WGSL and CHECKED in str(n.value) for n in nodes)


def materialize(value: Value) -> GpuArray:
    """An array holding ``value``: a deferred expression or a view is launched."""
    if isinstance(value, GpuArray):
        return value
    if isinstance(value, Operand):
        return elementwise("x0", [value], value.array.dtype, value.shape)
    if isinstance(value, Product):
        if value.array is None:
            value.array = matmul(_matrix(value.a), _matrix(value.b))
        return value.array
    if isinstance(value, Scattered):
        return _write_pieces(value, value.type)
    if isinstance(value, Reshaped):
        if value.array is None:
            value.array = materialize(value.operand).view(value.shape)
        return value.array
    if isinstance(value, Rows):
        return launch_rows(value)
    if isinstance(value, Summed):
        if value.array is None:
            value.array = _finish_sum(value)
        return value.array
    if value.array is None:
        value.array = emit(value.expr, value.inputs, value.type)
    return value.array


def emit(
    expr: Expr,
    inputs: list[Value],
    out: TensorType,
    target: GpuArray | Operand | None = None,
    siblings: Sequence[Deferred] = (),
) -> GpuArray:
    """Launch ``expr`` over ``inputs`` as one kernel (into ``target`` when given),
    launching deferred inputs on their own first if there are too many leaves.

    A product among the leaves that has the output's shape (a matmul whose only reader
    is this chain) is launched with the expression as its epilogue: one dispatch
    stores ``act(x @ w + b)``. Other products are launched on their own first.
    """
    kept: list[tuple[Expr, Deferred]] = []
    fused = fused_expression(expr, inputs, kept)
    if fused is None:
        # too many leaves for one kernel: launch parts of the deferred inputs first
        _cut(expr, inputs)
        kept.clear()
        fused = fused_expression(expr, inputs, kept)
    if fused is None:
        inputs = [materialize(v) for v in inputs]
        kept.clear()
        fused = fused_expression(expr, inputs)
        assert fused is not None
    tree, found = fused
    leaves: list[FusedLeaf] = [materialize(v) if isinstance(v, Summed) else v for v in found]
    shape = tuple(out.shape)
    host = _epilogue_host(tree, leaves, out, target)
    if host is not None:
        p = leaves[host]
        assert isinstance(p, Product)
        others = [
            materialize(v) if isinstance(v, (Product, Rows, Summed)) else v
            for k, v in enumerate(leaves)
            if k != host
        ]
        order = [host, *(k for k in range(len(leaves)) if k != host)]
        renamed = substitute(tree, [arg(order.index(k)) for k in range(len(leaves))])
        dtype = numpy_dtype(out.dtype)  # the product's: float32 or float16
        result = GpuArray.empty(shape, dtype, Operand.of(p.a).array.device)
        if p.shared:  # C keeps the product for the other kernels reading it
            p.array = GpuArray.empty(shape, dtype, result.device)
            epilogue = Epilogue(renamed, others, result)
            matmul_into(_view(p.a), _view(p.b), p.array, epilogue=epilogue)
        else:
            matmul_into(_view(p.a), _view(p.b), result, epilogue=Epilogue(renamed, others))
        return result
    rows = _rows_host(tree, leaves, out, target, siblings, kept)
    if rows is not None:
        return rows
    arrays = [materialize(v) if isinstance(v, (Product, Rows, Summed)) else v for v in leaves]
    if target is not None:
        return elementwise_tree(tree, arrays, out=Operand.of(target))
    return elementwise_tree(tree, arrays, numpy_dtype(out.dtype), shape)


def _finish_sum(value: Summed) -> GpuArray:
    """A `Summed` value as an array: its partial sums added up by a reduction kernel
    (rounded once to float16 where it is float16)."""
    part = value.partials()
    whole = part.arena
    if part.offset or whole.size != part.chunks * part.size:
        view = Operand(whole, (part.chunks, part.size), (part.size, 1), part.offset)
        whole = materialize(view)
    out = GpuArray.empty(tuple(value.type.shape), numpy_dtype(value.type.dtype), whole.device)
    reduce_axis("sum", whole.view((part.chunks, part.size)), 0, out=out.view((part.size,)))
    return out


def _cut(expr: Expr, inputs: list[Value]) -> None:
    """Launch deferred values under ``expr`` until it fits one kernel (`fused_expression`):
    the deferred input with the most leaves first, once its own chain fits, so a long
    chain (a combined check over every gradient) is cut into kernels of as many leaves
    as one binds rather than one kernel per node."""
    while fused_expression(expr, inputs) is None:
        pending = [v for v in inputs if isinstance(v, Deferred) and v.array is None]
        if not pending:
            return
        largest = max(pending, key=_leaf_count)
        if fused_expression(largest.expr, largest.inputs) is None:
            _cut(largest.expr, largest.inputs)
            if fused_expression(largest.expr, largest.inputs) is None:
                return  # cannot be cut further: the caller launches its inputs
            continue  # cut below: the whole may fit now
        materialize(largest)


def _leaf_count(value: Deferred) -> int:
    """The leaves of ``value``'s fused expression (more than a kernel binds if it does
    not fit one)."""
    fused = fused_expression(value.expr, value.inputs)
    return MAX_INPUTS + 1 if fused is None else len(fused[1])


# Leaves a chain may read for a product to take it as its epilogue: the product alone
# (``gelu(x @ w)``, a scale). The matmul kernel reads further operands (a bias, a
# residual, attention's mask) correctly, but the H200 ran the transformer step 0.93x as
# fast with them as with a separate elementwise kernel (2026-12-02, benchmarks/run.py;
# measured again later that day with three leaves: transformer 1,292-1,321 against
# 1,394-1,418 steps/s, transformer_large 45 against 47), so they stay apart until the
# kernel reads them well.
EPILOGUE_LEAVES = 1


def _epilogue_host(
    tree: Expr, leaves: list[FusedLeaf], out: TensorType, target: GpuArray | Operand | None
) -> int | None:
    """The leaf that is a product ``tree`` can be the epilogue of, or None: the product
    has the output's shape and is the only leaf (`EPILOGUE_LEAVES`), the output is
    float32 or float16 as the product is (and no view of another buffer), no check is
    made and the product needs no split K."""
    if target is not None or out.dtype not in ("float32", "float16"):
        return None
    if _calls_checks(_nodes(tree)):
        return None
    if len(leaves) > EPILOGUE_LEAVES:
        return None
    for k, leaf in enumerate(leaves):
        if (
            isinstance(leaf, Product)
            and leaf.wgsl == wgsl_type(numpy_dtype(out.dtype))
            and len(leaves) - 1 <= MAX_EPILOGUE_OPERANDS - leaf.shared
            and _product_shape(leaf) == tuple(out.shape)
            and unsplit(_view(leaf.a), _view(leaf.b))
        ):
            return k
    return None


def _rows_host(
    tree: Expr,
    leaves: list[FusedLeaf],
    out: TensorType,
    target: GpuArray | Operand | None,
    siblings: Sequence[Deferred],
    kept: Sequence[tuple[Expr, Deferred]] = (),
) -> GpuArray | None:
    """``tree`` launched as the output expression of a row program among its leaves
    (`asgrad.gpu.plan.fusion_rows`), or None: the program has the output's shape (a
    reduction: its elements' shape, or its own), the output is float32 or float16
    (rounded as the kernel stores it; no view of another buffer) and no check is made.
    ``kept``: subtrees of ``tree`` (over its leaves) the kernel stores as well."""
    if target is not None or out.dtype not in ("float32", "float16"):
        return None
    if _calls_checks(_nodes(tree)):
        return None
    for k, leaf in enumerate(leaves):
        if not isinstance(leaf, Rows):
            continue
        own = leaf.full is not None and tuple(leaf.type.shape) == tuple(out.shape)
        if own or can_host(leaf, tuple(out.shape)):
            dtype = np.dtype(numpy_dtype(out.dtype))
            return rows_epilogue(tree, k, list(leaves), siblings, own, dtype, kept)
    return None


def _product_shape(p: Product) -> tuple[int, ...] | None:
    a, b = Operand.of(p.a).shape, Operand.of(p.b).shape
    if len(a) < 2 or len(b) < 2:
        return None
    batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
    return (*batch, a[-2], b[-1])


def _view(v: GpuArray | Operand) -> MatrixView:
    m = _matrix(v)
    return m if isinstance(m, MatrixView) else MatrixView(m)


def _wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


def lower_node(
    node: Node,
    ins: list[Value],
    out_type: TensorType,
    inline: bool,
    in_shape: tuple[int, ...] | None = None,
    shared: bool = False,
    siblings: Sequence[Deferred] = (),
) -> Value:
    """The value of ``node`` from its inputs' values: launched, or with ``inline``
    deferred into its users (an expression, a passed-on input, a strided view).
    ``in_shape``: the shape of its first input's type (by default its value's);
    ``shared``: an inlined matmul read by more than one kernel (`shared_products`), or
    an inlined chain a row kernel stores for its other readers (`stored_chains`);
    ``siblings``: elementwise kernels its row kernel may compute too
    (`asgrad.gpu.plan.fusion_rows`)."""
    if in_shape is None:
        in_shape = _value_shape(ins[0]) if ins else ()
    if inline and node.op in LAZY_VIEWS:
        return _lazy_view(node, ins[0], in_shape, out_type)
    if inline and node.op in VIEW_OPS and _core(in_shape) == _core(out_type.shape):
        return ins[0]  # shapes differ by leading 1s only: broadcasting realigns them
    if node.op == "add" and not inline:
        pieces = _scatter_pieces(Deferred(SUM, ins, out_type))
        if pieces is not None:
            return _write_pieces(pieces, out_type)
    if node.op in EXPRESSION_OPS:
        expr = expression_tree(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
        assert expr is not None
        depth = height(expr) + max((v.depth for v in ins if isinstance(v, Deferred)), default=0)
        if inline and depth <= MAX_DEPTH:
            return Deferred(expr, ins, out_type, node.attrs, depth, keep=shared)
        return emit(expr, ins, out_type, siblings=siblings)  # deeper than MAX_DEPTH: cut
    if inline and node.op in ("broadcast_to", "broadcast_like"):
        return ins[0]  # the user broadcasts it
    if inline and node.op == "transpose":
        source = ins[0] if isinstance(ins[0], Operand) else materialize(ins[0])
        op = Operand.of(source)
        if in_shape and op.shape != in_shape:  # a broadcast passed on: make it real
            op = Operand(op.array, in_shape, op.broadcast_strides(in_shape), op.offset)
        return op.permute(tuple(node.attrs["axes"]))
    if node.op == "matmul":
        a, b = (v if _matrix_like(v) else materialize(v) for v in ins)
        if inline:
            return Product(a, b, shared)
        return matmul(_matrix(a), _matrix(b))
    rows = get_op(node.op).rows
    if rows is not None and out_type.dtype == "float32" and node.op in ROW_OPS:
        program = rows(len(in_shape), len(ins), **node.attrs)
        value = Rows(program, list(ins), out_type, ROW_OPS[node.op], keep=shared)
        return value if inline else launch_rows(value, siblings)
    if _summed_product(ins[0], node):
        folded = _folded_product(ins[0], out_type)
        if folded is not None:
            return folded
    if inline or (ins and isinstance(ins[0], Deferred) and ins[0].array is None):
        # a reduction whose reader or input chain the row kernel takes (fusion_rows)
        reduced = reduction_rows(node.op, ins[0], in_shape, node.attrs, out_type)
        if reduced is not None:
            return reduced if inline else launch_rows(reduced)
    if inline and node.op == "scatter_slice":
        return Scattered(out_type, [(tuple(node.attrs["index"]), ins[0])])
    shape_only = SHAPE_INPUTS.get(node.op, ())
    first = materialize(ins[0])  # a shape-only input is never read: any array stands in
    args = [first if k == 0 or k in shape_only else materialize(v) for k, v in enumerate(ins)]
    return lower(node.op, args, node.attrs, out_type)


def product_into(ins: list[Value], into: Operand) -> Operand:
    """The product of ``ins`` stored through ``into`` (a strided destination of its
    shape, `asgrad.gpu.plan.destinations`): one matmul dispatch, no copy after it."""
    a, b = (v if _matrix_like(v) else materialize(v) for v in ins)
    matmul_into(_view(a), _view(b), into)
    return into


def _write_pieces(scattered: Scattered, out_type: TensorType) -> GpuArray:
    """Zeros where no piece lands (none when they cover it), then each piece."""
    dtype = numpy_dtype(out_type.dtype)
    covered = sum(
        math.prod(b - a for a, b in _box(i, out_type.shape) or []) for i, _ in scattered.pieces
    )
    if covered == math.prod(out_type.shape):
        placed = _in_place(scattered, tuple(out_type.shape), dtype)
        if placed is not None:
            return placed  # each piece was written into its region (plan.destinations)
        result = GpuArray.empty(tuple(out_type.shape), dtype)
    else:
        result = elementwise(literal(0.0, wgsl_type(dtype)), [], dtype, tuple(out_type.shape))
    for index, piece in scattered.pieces:
        view = slice_view(Operand.of(result), index)
        if isinstance(piece, Reshaped):  # the destination reshaped instead
            reshaped = strided_reshape(view, piece.operand.shape)
            if reshaped is not None:
                view, piece = reshaped, piece.operand
        emit(arg(0), [piece], TensorType(view.shape, out_type.dtype), view)
    return result


def _in_place(scattered: Scattered, shape: tuple[int, ...], dtype: np.dtype) -> GpuArray | None:
    """The array of ``shape`` every piece is already the region of (each a view of it
    at its index), or None."""
    base: GpuArray | None = None
    for index, piece in scattered.pieces:
        if not isinstance(piece, (GpuArray, Operand)):
            return None
        op = Operand.of(piece)
        base = op.array if base is None else base
        if op.array is not base or tuple(base.shape) != shape or base.dtype != dtype:
            return None
        region = slice_view(Operand.of(base), index)
        if region.shape != op.shape or region.offset != op.offset:
            return None
        if any(
            n > 1 and a != b for n, a, b in zip(op.shape, op.strides, region.strides, strict=True)
        ):
            return None
    return base


def _value_shape(value: Value) -> tuple[int, ...]:
    if isinstance(value, (Deferred, Scattered, Rows, Summed)):
        return tuple(value.type.shape)
    if isinstance(value, Product):
        return tuple(materialize(value).shape)
    return tuple(value.shape)


def _lazy_view(node: Node, value: Value, in_shape: tuple[int, ...], out_type: TensorType) -> Value:
    """A view node's value as strides of its input (copied only when it cannot be)."""
    if (
        isinstance(value, Deferred)
        and _core(in_shape) == _core(out_type.shape)
        and len(out_type.shape) >= len(in_shape)  # leading 1s dropped: the leaves keep them
    ):
        return Deferred(value.expr, value.inputs, out_type, value.attrs, value.depth)  # 1s
    ones_only = [d for d in in_shape if d != 1] == [d for d in out_type.shape if d != 1]
    if isinstance(value, Rows) and value.full is not None and node.op != "slice" and ones_only:
        return value.reshaped(out_type)  # a reduction's size-1 axes added or dropped
    source = value if isinstance(value, (GpuArray, Operand)) else materialize(value)
    op = Operand.of(source)
    if op.shape != in_shape:  # a broadcast passed on unlaunched: its strides, made real
        op = Operand(op.array, in_shape, op.broadcast_strides(in_shape), op.offset)
    shape = tuple(out_type.shape)
    if node.op == "slice":
        return slice_view(op, node.attrs["index"])
    view = strided_reshape(op, shape)
    if view is not None:
        return view
    return Reshaped(op, shape)


def _matrix_like(v: Value) -> TypeGuard[GpuArray | Operand]:
    """An array, or a view the matmul kernels read: one of the matrix axes unit-strided
    and at most their batch axes."""
    if isinstance(v, GpuArray):
        return True
    if not isinstance(v, Operand) or len(v.shape) < 2 or len(v.shape) - 2 > MAX_BATCH_DIMS:
        return False
    return 1 in (v.strides[-1], v.strides[-2]) and min(v.strides) >= 0


def _matrix(v: GpuArray | Operand) -> GpuArray | MatrixView:
    if isinstance(v, Operand):
        return MatrixView(v.array, v.shape, v.strides, v.offset)
    return v


def _summed_product(value: Value, node: Node) -> TypeGuard[Product]:
    """Whether ``node`` sums a product over its batch axes, the product read by
    nothing else (`asgrad.gpu.plan.values.sums_batch`): any other product a node
    that is no elementwise op reads is shared (`shared_products`)."""
    return (
        isinstance(value, Product)
        and not value.shared
        and value.array is None
        and node.op in ("sum", "sum_to_like")
    )


def _folded_product(p: Product, out_type: TensorType) -> GpuArray | None:
    """``sum over the batch of a_b @ b_b`` as one matmul, ``[a_0 a_1 ..] @ [b_0; b_1; ..]``:
    the batch axes folded into K. None when an operand's strides cannot fold (a
    broadcast batch axis, a layout that is not batch-major over K)."""
    views = _folded_views(p)
    if views is None:
        return None
    return matmul(*views).view(tuple(out_type.shape))


def _folded_views(p: Product) -> tuple[MatrixView, MatrixView] | None:
    """The two matrices of `_folded_product`, or None."""
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
    tiles = -(-m // 128) * -(-n // 128)
    if m * n * total > FOLD_MAX_WORK and tiles < FOLD_MIN_TILES:
        return None  # few output tiles over a deep K: the batched product keeps the GPU busy
    va = MatrixView(a.array, (m, total), (a.strides[-2], sa), a.offset)
    vb = MatrixView(b.array, (total, n), (sb, b.strides[-1]), b.offset)
    return va, vb


# The most elements the partial products of one split-K weight gradient may hold until
# the update adds them up (they live from the product to the update batch).
MAX_PIECES = 1 << 22


def product_pieces(
    node: Node, ins: list[Value], out_type: TensorType
) -> tuple[GpuArray, int] | None:
    """A float32 or float16 product ``node`` (a matmul of matrices, or a batched one
    summed over its batch, `_folded_product`) launched without summing its split K: the
    float32 partial products, shaped ``(splits, size)``, and ``splits``; a multi-tensor
    update reads their sum (`asgrad.gpu.plan.multi_sums`), so no column reduction is
    launched for them. None, launching nothing, when ``node`` is no such product, K is
    not split, or the pieces would hold more than `MAX_PIECES` elements.
    """
    if node.op == "matmul" and len(ins) == 2 and all(_matrix_like(v) for v in ins):
        a, b = (_view(v) for v in ins if _matrix_like(v))
        if len(a.shape) != 2 or len(b.shape) != 2:
            return None
    elif node.inputs and _summed_product(ins[0], node):
        views = _folded_views(ins[0])
        if views is None:
            return None
        a, b = views
    else:
        return None
    dtype = a.array.dtype
    if dtype not in (np.float32, np.float16) or b.array.dtype != dtype:
        return None
    tile, splits = choose(a, b)
    if splits == 1 or math.prod(out_type.shape) * splits > MAX_PIECES:
        return None  # K whole, or pieces holding too much memory until the update
    out = GpuArray.empty((a.shape[-2], b.shape[-1]), dtype, a.array.device)
    if math.prod(out.shape) != math.prod(out_type.shape):
        return None
    pieces = matmul_into(a, b, out, tile, splits, sum_pieces=False)
    if pieces is None:  # K was not split after all: ``out`` holds the product
        return out.view(tuple(out_type.shape)), 1
    return pieces, pieces.shape[0]


def lower_in_place(node: Node, ins: list[Value], out_type: TensorType, target: GpuArray) -> Value:
    """An update rule (an elementwise node) written straight into its variable's buffer."""
    expr = expression_tree(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
    assert expr is not None
    try:
        return emit(expr, ins, out_type, target)
    except GpuUnsupportedError:  # the old value is read other than element-wise
        return emit(expr, ins, out_type)
