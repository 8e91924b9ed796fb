"""Row fusions: softmax's input gradient as one row kernel (the reduction family's fused
line group), a layer norm's weight gradient as one pass (the norm family's).

`fuse_softmax_backward` (the reduction family's ``fuse`` in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. The gradient of
``y = softmax(x)`` along the last axis is ``y * (g - sum(g * y))``; autograd writes it
as four lines (a product, its sum along the row, a difference, a product), four passes
over a value the size of the attention scores. Where the three intermediates are read
by nothing else and are no output, the group (with a product by a constant scalar
that alone reads it: attention's scale) becomes one compiled row kernel
(`asgrad.tensor.cpu.jit.render_rows.rows_kernel` of that row program: the sum
reassociated, as the softmax kernel's is; the result differs from the numpy path's by
rounding only), the last line's, and the other three lines go.

A layer norm's weight gradient is ``sum(g * x_hat)`` over the rows, where autograd
recomputes ``x_hat = layer_norm(x)`` (no weight) for it: three lines, writing and
reading ``x_hat`` and the product. Where both are read by nothing else and are no
output, `fuse_layer_norm_weight_grad` makes the sum's line one compiled pass over ``x``
and ``g`` (`asgrad.tensor.cpu.jit.kernels_norm.layer_norm_weight_grad`: ``x_hat`` as the
layer norm kernel computes it, the rows added in numpy's order) and the other two go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit.kernels import LazyKernel
from asgrad.tensor.cpu.jit.render_rows import rows_kernel
from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_at,
    line_readers,
    runtime_roots,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType
from asgrad.tensor.ir.rows import RowBuilder, RowProgram

_OPS = ("mul", "sum", "sub")


def softmax_backward_rows(ndim: int, scale: float | None = None) -> RowProgram:
    """``y * (g - sum(g * y))`` along the last of ``ndim`` axes, times ``scale`` when
    given; inputs ``(g, y)``.

    >>> from asgrad.tensor.cpu.jit.fuse_rows import softmax_backward_rows
    >>> softmax_backward_rows(4).axes
    (3,)
    """
    p = RowBuilder(("element", "element"), axes=(ndim - 1,))
    g, y = p.input(0), p.input(1)
    s = p.reduce("sum", g * y)
    grad = y * (g - s)
    return p.program(grad if scale is None else grad * scale)


def _scalar(value: Any) -> float | None:
    """A constant scalar's value (a 0-d or one-element float array, or a float)."""
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind == "f":
        return float(value.reshape(()))
    return None


def fuse_softmax_backward(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each softmax input gradient as one kernel (see the module
    docstring)."""
    if not all(context.registered(op) for op in _OPS):
        return list(lines)
    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    at = line_at(lines)

    def only_reader(node: Node, op: str) -> Node | None:
        """The one line reading ``node``'s value, when it is an ``op``, and the value
        is computed on its own line and is no root."""
        if node.id in roots or refs[node.id].id != node.id or node.id not in at:
            return None
        users = readers.get(node.id, [])
        if len(users) != 1 or lines[users[0]].node.op != op:
            return None
        return lines[users[0]].node

    def operands(node: Node) -> list[int] | None:
        ids = [refs[n.id] for n in node.inputs]
        return None if any(r.is_const for r in ids) else [r.id for r in ids]

    drop: set[int] = set()
    out = list(lines)
    for line in lines:
        prod = line.node
        t = types[prod.id]
        if prod.op != "mul" or t.dtype not in ("float32", "float64") or len(t.shape) < 1:
            continue
        pair = operands(prod)
        if pair is None or any(types[i] != t for i in pair) or pair[0] == pair[1]:
            continue
        total = only_reader(prod, "sum")
        if total is None or tuple(total.attrs["axis"]) != (len(t.shape) - 1,):
            continue
        if not total.attrs["keepdims"] or refs[total.inputs[0].id].id != prod.id:
            continue
        diff = only_reader(total, "sub")
        if diff is None or operands(diff) is None:
            continue
        g, s = operands(diff) or []
        if s != total.id or g not in pair or types[diff.id] != t:
            continue
        y = pair[1] if g == pair[0] else pair[0]
        last = only_reader(diff, "mul")
        if (
            last is None
            or types[last.id] != t
            or sorted(operands(last) or []) != sorted([y, diff.id])
        ):
            continue
        # a product by a constant scalar after it (attention's scale) goes in too
        scale, end = None, last
        users = readers.get(last.id, [])
        if last.id not in roots and len(users) == 1 and lines[users[0]].node.op == "mul":
            after = lines[users[0]].node
            ids = [refs[n.id] for n in after.inputs]
            consts = [r for r in ids if r.is_const]
            if types[after.id] == t and len(consts) == 1 and [r.id for r in ids].count(last.id):
                scale = _scalar(consts[0].const)
                end = after if scale is not None else last
        kernel = rows_kernel(softmax_backward_rows(len(t.shape), scale), [t, t], t)
        if kernel is None:
            continue
        name = f"_softmax_backward{end.id}"
        env[name] = LazyKernel(kernel)
        call = Call(name, (Value(g), Value(y)))
        out[at[end.id]] = Line(node=end, call=call, reuse=Reuse.INTO_SLOT, into=with_out(call))
        drop.update(at[n.id] for n in (prod, total, diff, last) if n is not end)
    return [line for k, line in enumerate(out) if k not in drop]


def fuse_layer_norm_weight_grad(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each layer norm weight gradient as one pass (see the module
    docstring)."""
    if not all(context.registered(op) for op in ("layer_norm", "mul", "sum")):
        return list(lines)
    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    at = line_at(lines)

    def only_reader(node: Node) -> Node | None:
        if node.id in roots or refs[node.id].id != node.id:
            return None
        users = readers.get(node.id, [])
        return lines[users[0]].node if len(users) == 1 else None

    drop: set[int] = set()
    out = list(lines)
    for line in lines:
        norm = line.node
        t = types[norm.id]
        if norm.op != "layer_norm" or len(norm.inputs) != 1 or len(t.shape) < 2:
            continue
        if t.dtype not in ("float32", "float64") or tuple(norm.attrs["normalized_shape"]) != (
            t.shape[-1],
        ):
            continue
        x = refs[norm.inputs[0].id]
        prod = only_reader(norm)
        if x.is_const or prod is None or prod.op != "mul" or types[prod.id] != t:
            continue
        ids = [refs[n.id] for n in prod.inputs]
        if any(r.is_const for r in ids) or sorted(r.id for r in ids).count(norm.id) != 1:
            continue
        g = ids[0].id if ids[1].id == norm.id else ids[1].id
        total = only_reader(prod)
        if g == norm.id or types[g] != t or total is None or total.op != "sum":
            continue
        if tuple(total.attrs["axis"]) != tuple(range(len(t.shape) - 1)):
            continue
        if total.attrs["keepdims"] or types[total.id].shape != t.shape[-1:]:
            continue
        name = f"_ln_weight_grad{total.id}"
        env[name] = _LazyNorm(float(norm.attrs["eps"]))
        out[at[total.id]] = Line(
            node=total, call=Call(name, (Value(g), Value(x.id))), reuse=Reuse.FRESH
        )
        drop.update((at[norm.id], at[prod.id]))
    return [line for k, line in enumerate(out) if k not in drop]


class _LazyNorm:
    """`layer_norm_weight_grad` at one ``eps``, importing Numba on its first call."""

    def __init__(self, eps: float) -> None:
        self.eps = eps

    def __call__(self, g: Any, x: Any) -> Any:
        from asgrad.tensor.cpu.jit.kernels_norm import layer_norm_weight_grad

        return layer_norm_weight_grad(g, x, eps=self.eps)
