"""Exact-shape numpy lines: faster numpy forms of some ops at known types.

At exact types some registered kernels have a faster numpy form: a call of numpy
itself instead of the kernel's wrapper, a view instead of a copy, a batched matrix
product as one product. An elementwise op's form comes from its scalar expression
(`expression_line`: one rule per primitive, never per op); the structural
families' forms (matrix products, reductions, views) are the functions below, which
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS` lists by family and op. Each is
written for the op's registered kernel and applies only while the op's kernel is
that one (the code generator checks). Everything an op declares about its own kernel
([`OpDef`][asgrad.tensor.OpDef] fields) is read by the code generator instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import (
    OUT,
    Call,
    Divide,
    Expr,
    Line,
    Method,
    Ref,
    Reuse,
    Value,
    shaped,
    with_out,
)
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType


@dataclass(frozen=True)
class Context:
    """What a specialisation may read besides the node.

    Attributes:
        types: Every node's exact type.
        refs: Every node so far: a runtime value or a constant.
        producer: For a value computed on a line, the node of that line.
        users: How many nodes (and roots) use each node.
        roots: The ids of the outputs and update values.
        registered: Whether an op's kernel is its registered one.
    """

    types: Mapping[int, TensorType]
    refs: Mapping[int, Ref]
    producer: Mapping[int, Node]
    users: Mapping[int, int]
    roots: Collection[int]
    registered: Callable[[str], bool]


def _matmul_batch_sum(p: np.ndarray, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``(p @ q).sum(batch axes)`` as one matrix product: p (..., K, T), q (..., T, N).

    ``sum_b p_b @ q_b`` is ``P @ Q`` with the batches laid side by side along T, so
    a weight gradient needs no batched product nor the reduction after it. ``out``:
    a (K, N) buffer to write into.
    """
    k, n = p.shape[-2], q.shape[-1]
    a, b = p.swapaxes(-1, -2).reshape(-1, k).T, q.reshape(-1, n)
    result: np.ndarray = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    return result


_INT_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def where_zero(cond: np.ndarray, x: np.ndarray, keep: bool = True) -> np.ndarray:
    """``where(cond, x, 0)`` (``keep``) or ``where(cond, 0, x)``, bit for bit.

    ``cond`` and ``x`` have the output's shape, ``x`` is float32/float64. The bool
    mask becomes an all-ones or all-zeros integer per element and is ANDed with x's
    bits: NaN, infinities and signed zeros pass unchanged where kept, +0.0 elsewhere.
    About 20x faster than ``np.where`` with a scalar branch.
    """
    mask = cond.view(np.uint8).astype(_INT_OF[x.dtype])
    if keep:
        np.negative(mask, out=mask)  # True -> all ones, False -> 0
    else:
        mask -= 1  # True -> 0, False -> all ones
    np.bitwise_and(mask, x.view(mask.dtype), out=mask)
    out: np.ndarray = mask.view(x.dtype)
    return out


def add_reduce(x: np.ndarray, *args: Any) -> Any:
    """``numpy.add.reduce`` over ``x`` in C order, so that the sum's rounding does not
    depend on the memory layout: an elementwise result over a transposed value is laid
    out as its input without buffer reuse and in C order with it (a scratch slot)."""
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    return np.add.reduce(x, *args)


# The numpy functions the specialised expressions call, by their names there.
HELPERS: dict[str, Any] = {
    "_matmul": np.matmul,
    "_np": np,
    "_add_reduce": add_reduce,
    "_max_reduce": np.maximum.reduce,
    "_min_reduce": np.minimum.reduce,
    "_broadcast_to": np.broadcast_to,
    "_matmul_batch_sum": _matmul_batch_sum,
    "_where_zero": where_zero,
    "np_float32": np.float32,
    "np_float64": np.float64,
}


def _in_types(node: Node, ctx: Context) -> list[TensorType]:
    return [ctx.types[n.id] for n in node.inputs]


def _same_dtype(node: Node, ctx: Context) -> bool:
    out = ctx.types[node.id]
    return all(t.dtype == out.dtype for t in _in_types(node, ctx))


def _args(node: Node, ctx: Context) -> tuple[Value, ...]:
    return tuple(Value(ctx.refs[n.id].id) for n in node.inputs)


def _product(node: Node, ctx: Context, call: Expr, into: Expr, flops: int) -> Line:
    """A matrix product's line: into a free slot when shaped and of one dtype."""
    if shaped(ctx.types[node.id]) and _same_dtype(node, ctx):
        return Line(node=node, call=call, reuse=Reuse.INTO_SLOT, into=into, flops=flops)
    return Line(node=node, call=call, flops=flops)


def matmul(node: Node, ctx: Context) -> Line | None:
    """``np.matmul`` itself; a batched product with a matrix as one matrix product.
    float16 declines: its kernel accumulates in float32."""
    (a, b), out_t = _in_types(node, ctx), ctx.types[node.id]
    if out_t.dtype == "float16":
        return None
    x, w = _args(node, ctx)
    flops = 2 * int(np.prod(out_t.shape)) * int(a.shape[-1])
    if len(a.shape) > 2 and len(b.shape) == 2:
        rows, shape = int(np.prod(a.shape[:-1])), repr(out_t.shape)
        flat = Method(x, "reshape", (str(rows), str(a.shape[-1])))
        out = Method(OUT, "reshape", (str(rows), str(out_t.shape[-1])))
        call = Method(Call("_matmul", (flat, w)), "reshape", (shape,))
        into = Method(Call("_matmul", (flat, w), (("out", out),)), "reshape", (shape,))
        return _product(node, ctx, call, into, flops)
    plain = Call("_matmul", (x, w))
    return _product(node, ctx, plain, with_out(plain), flops)


def _is_zero(ref: Ref) -> bool:
    """Whether ``ref`` is the constant scalar +0.0."""
    return (
        ref.is_const
        and np.shape(ref.const) == ()
        and float(ref.const) == 0.0
        and not np.signbit(ref.const)
    )


def _where_line(node: Node, ctx: Context, operands: Sequence[Node]) -> Line | None:
    """``where(cond, x, 0)`` (or ``where(cond, 0, x)``) of floats as bit operations."""
    out_t = ctx.types[node.id]
    cond, when_true, when_false = operands
    if not (_is_float(out_t) and out_t.shape and ctx.types[cond.id].shape == out_t.shape):
        return None
    for keep, value, other in ((True, when_true, when_false), (False, when_false, when_true)):
        if ctx.types[value.id].shape == out_t.shape and _is_zero(ctx.refs[other.id]):
            args = (Value(ctx.refs[cond.id].id), Value(ctx.refs[value.id].id), repr(keep))
            return Line(node=node, call=Call("_where_zero", args), reuse=Reuse.FRESH)
    return None


def transpose(node: Node, ctx: Context) -> Line:
    """A transposed view."""
    (x,) = _args(node, ctx)
    return Line(node=node, call=Method(x, "transpose", (repr(tuple(node.attrs["axes"])),)))


def reshape_view(node: Node, ctx: Context) -> Line:
    """A view of the first input with the result's shape (reshape, squeeze...)."""
    x = _args(node, ctx)[0]
    return Line(node=node, call=Method(x, "reshape", (repr(ctx.types[node.id].shape),)))


def broadcast(node: Node, ctx: Context) -> Line:
    """A broadcast view of the first input."""
    x = _args(node, ctx)[0]
    return Line(node=node, call=Call("_broadcast_to", (x, repr(ctx.types[node.id].shape))))


_REDUCE = {"sum": "_add_reduce", "mean": "_add_reduce", "max": "_max_reduce", "min": "_min_reduce"}


def reduce(node: Node, ctx: Context) -> Line | None:
    """A float reduction as the ufunc's ``reduce``; a mean divides by the count."""
    out_t, axes = ctx.types[node.id], tuple(node.attrs["axis"])
    if not (_is_float(out_t) and axes):
        return None
    keep = bool(node.attrs["keepdims"])
    x = _args(node, ctx)[0]
    call: Expr = Call(_REDUCE[node.op], (x, repr(axes), "None", "None", repr(keep)))
    if node.op == "mean":
        count = int(np.prod([ctx.types[node.inputs[0].id].shape[a] for a in axes]))
        call = Divide(call, Call(f"np_{out_t.dtype}", (str(count),)))
    # np.add.reduce returns a fresh array (or a numpy scalar). So do max and min,
    # which are classed as possibly aliasing all the same (a conservative plan).
    return Line(
        node=node, call=call, reuse=Reuse.FRESH if node.op in ("sum", "mean") else Reuse.ALIAS
    )


def _sum_to_axes(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(src) - len(dst)
    stretched = (i + lead for i, d in enumerate(dst) if d == 1 and src[i + lead] != 1)
    return (*range(lead), *stretched)


def sum_to_like(node: Node, ctx: Context) -> Line | None:
    """A reduction to the target shape; a batched product summed over its batch (a
    weight gradient) as one matrix product."""
    out_t = ctx.types[node.id]
    if not _is_float(out_t):
        return None
    x = node.inputs[0]
    src, dst = ctx.types[x.id].shape, out_t.shape
    made = ctx.producer.get(x.id)
    if (
        made is not None
        and made.op == "matmul"
        and ctx.users.get(x.id, 0) == 1
        and x.id not in ctx.roots
        and len(dst) == 2
        and len(src) > 2
        and dst == src[-2:]
        and ctx.registered("matmul")
    ):
        p, q = made.inputs
        if ctx.types[p.id].shape[:-2] == ctx.types[q.id].shape[:-2] == src[:-2]:
            flops = 2 * int(np.prod(ctx.types[p.id].shape)) * int(ctx.types[q.id].shape[-1])
            args = (Value(ctx.refs[p.id].id), Value(ctx.refs[q.id].id))
            into = Call("_matmul_batch_sum", (*args, OUT))
            return _product(node, ctx, Call("_matmul_batch_sum", args), into, flops)
    value = Value(ctx.refs[x.id].id)
    axes = _sum_to_axes(src, dst)
    if not axes:
        return Line(node=node, call=Method(value, "reshape", (repr(dst),)))
    if axes == tuple(range(len(src) - len(dst))):  # leading axes only
        return Line(node=node, call=Call("_add_reduce", (value, repr(axes))), reuse=Reuse.FRESH)
    keep = Call("_add_reduce", (value, repr(axes), "None", "None", "True"))
    return Line(node=node, call=Method(keep, "reshape", (repr(dst),)), reuse=Reuse.FRESH)


def _is_float(t: TensorType) -> bool:
    return t.dtype in ("float32", "float64")


def _operand_nodes(node: Node, expr: Any) -> list[Node] | None:
    """The input nodes an expression's operands are, when each is an input as is."""
    if not all(a.op == "arg" for a in expr.args):
        return None
    return [node.inputs[int(a.value)] for a in expr.args]


def _ufunc_line(node: Node, ctx: Context, expr: Any, fn: np.ufunc) -> Line | None:
    """One numpy ufunc over the inputs and number constants, in place when it may."""
    args: list[Expr] = []
    samples: list[Any] = []
    for a in expr.args:
        if a.op == "arg":
            n = node.inputs[int(a.value)]
            args.append(Value(ctx.refs[n.id].id))
            samples.append(np.zeros((), ctx.types[n.id].dtype))
        elif a.op == "const" and isinstance(a.value, bool | int | float) and np.isfinite(a.value):
            args.append(repr(a.value))
            samples.append(a.value)
        else:
            return None
    out_t = ctx.types[node.id]
    with np.errstate(all="ignore"):
        if np.asarray(fn(*samples)).dtype != np.dtype(out_t.dtype):
            return None
    if getattr(np, fn.__name__, None) is not fn:
        return None
    call = Call(f"_np.{fn.__name__}", tuple(args))
    ins = [ctx.types[n.id] for n in node.inputs]
    if shaped(out_t) and all(t.dtype == out_t.dtype for t in ins):
        return Line(node=node, call=call, reuse=Reuse.IN_PLACE, into=with_out(call))
    return Line(node=node, call=call)


def expression_line(node: Node, ctx: Context, expr: Any) -> Line | None:
    """The numpy line of an elementwise node whose expression is one primitive, or None
    for the op's kernel: ``where`` with a zero branch as bit operations, ``cast`` as
    ``astype``, a primitive whose numpy meaning is a ufunc, applied to inputs and number
    constants, as that ufunc called directly (in place when it may). A primitive of the
    inputs alone is left to the kernel: that is the ufunc itself, or a wrapper adding
    a check (an integer power)."""
    from asgrad.tensor.ir.scalar import PRIMITIVES

    if expr.op in ("arg", "const"):
        return None
    if expr.op == "where":
        operands = _operand_nodes(node, expr)
        return None if operands is None else _where_line(node, ctx, operands)
    if expr.op == "cast":
        operands = _operand_nodes(node, expr)
        if operands is None:
            return None
        x, out_t = Value(ctx.refs[operands[0].id].id), ctx.types[node.id]
        call = Method(x, "astype", (repr(out_t.dtype),))
        return Line(node=node, call=call, reuse=Reuse.FRESH if shaped(out_t) else Reuse.ALIAS)
    fn = PRIMITIVES[expr.op].numpy
    if isinstance(fn, np.ufunc) and any(a.op == "const" for a in expr.args):
        return _ufunc_line(node, ctx, expr, fn)
    return None
