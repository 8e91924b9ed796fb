"""Gradient rules of the reductions: ``sum``, ``mean``, ``var``, ``max``, ``min``, ``prod``.

Each broadcasts the incoming gradient back over the reduced axes (``broadcast_like``
the input, so it also holds for shapes known only at run time). ``argmax`` is
piecewise constant and ``size_ratio`` depends only on shapes: neither has a rule.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor, where

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


def _expand(g: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    return g if keepdims or not axes else g.expand_dims(axes)


def _unreduce(g: Tensor, x: Tensor, attrs: Attrs) -> Tensor:
    """The gradient of a reduction broadcast back to the shape of ``x``."""
    expanded = _expand(g, tuple(attrs["axis"]), attrs["keepdims"])
    return x.graph.apply("broadcast_like", (expanded, x))


@rule("sum")
def _sum(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (_unreduce(g, ins[0], attrs),)


@rule("mean")
def _mean(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    ratio = x.graph.apply("size_ratio", (out, x))
    return (_unreduce(g * ratio, x, attrs),)


@rule("var")
def _var(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    ratio = x.graph.apply("size_ratio", (out, x))  # 1 / n
    correction = attrs["correction"]
    if correction:  # 1 / (n - correction)
        ratio = ratio / (1.0 - ratio * correction)
    centered = x - x.mean(axis=attrs["axis"], keepdims=True)
    return (_unreduce(g * ratio, x, attrs) * centered * 2.0,)


@rule("max", "min")
def _max(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # Ties share the gradient equally.
    x = ins[0]
    axes, keep = tuple(attrs["axis"]), attrs["keepdims"]
    hit = x == x.graph.apply("broadcast_like", (_expand(out, axes, keep), x))
    share = hit.cast(x.dtype)
    count = share.sum(axis=axes, keepdims=True)
    gx = x.graph.apply("broadcast_like", (_expand(g, axes, keep) / count, x))
    return (gx * share,)


@rule("prod")
def _prod(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # d out / d x_i is the product of the others: out / x_i where no x is 0; with one
    # zero in the reduced values, the product of the others at the zero and 0 elsewhere;
    # with several, 0. The product of the nonzero values gives all three without 0 / 0.
    x = ins[0]
    axes = tuple(attrs["axis"])
    zero = x == 0
    nonzero = where(zero, x.graph.constant(1, x.dtype), x)
    others = nonzero.prod(axis=axes, keepdims=True)
    zeros = zero.cast("int32").sum(axis=axes, keepdims=True)
    none = x.graph.constant(0, x.dtype)
    at_zero = where(zero, others, none)
    d = where(zeros == 0, others / nonzero, where(zeros == 1, at_zero, none))
    return (_unreduce(g, x, attrs) * d,)


# -- scans and sorts ------------------------------------------------------------------------
def _scatter_along(g: Tensor, idx: Tensor, axis: int, size: int) -> Tensor:
    """``out[..., idx[..., j], ...] += g[..., j, ...]`` along ``axis`` (of ``size``): a
    one-hot product, so it runs on every backend and differentiates again (memory and
    work grow with size squared per line along the axis)."""
    if size == 0:  # nothing to scatter into: the gradient is as empty as g
        return g
    last = g.ndim - 1
    gl, il = (t.swapaxes(axis, last) if axis != last else t for t in (g, idx))
    onehot = il.one_hot(size, dtype=g.dtype)  # (..., m, size)
    out = (gl.expand_dims(-2) @ onehot).squeeze(-2)
    return out.swapaxes(axis, last) if axis != last else out


@rule("cumsum")
def _cumsum(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    reverse = not attrs["reverse"]
    return (g.graph.apply("cumsum", (g,), {"axis": attrs["axis"], "reverse": reverse}),)


@rule("cumprod")
def _cumprod(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # d out_j / d x_i = prod_{k <= j, k != i} x_k. Before a line's first zero that is
    # out_j / x_i; at the first zero it is the running product with that zero taken
    # as 1; after it, 0 (each product holds the first zero).
    x, axis = ins[0], attrs["axis"]
    graph = x.graph

    def suffix(t: Tensor) -> Tensor:
        return graph.apply("cumsum", (t,), {"axis": axis, "reverse": True})

    one, zero = graph.constant(1, x.dtype), graph.constant(0, x.dtype)
    is_zero = x == 0
    zeros_so_far = graph.apply("cumsum", (is_zero.cast("int32"),), {"axis": axis, "reverse": False})
    before = zeros_so_far == 0
    first = is_zero & (zeros_so_far == 1)
    safe = where(before, x, one)
    early = suffix(g * out) / safe
    skipped = graph.apply("cumprod", (where(first, one, x),), {"axis": axis})
    late = suffix(g * where(zeros_so_far == 1, skipped, zero))
    return (where(before, early, where(first, late, zero)),)


@rule("cummax", "cummin")
def _cummax(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, axis = ins[0], attrs["axis"]
    index_op = "cummax_index" if out.op == "cummax" else "cummin_index"
    idx = x.graph.apply(index_op, (x,), {"axis": axis})
    return (_scatter_along(g, idx, axis, x.shape[axis]),)


@rule("sort")
def _sort(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    idx = x.graph.apply("argsort", (x,), dict(attrs))
    return (_scatter_along(g, idx, attrs["axis"], x.shape[attrs["axis"]]),)


@rule("logcumsumexp")
def _logcumsumexp(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # d/dx_i = sum over the later j of g_j e**(x_i - out_j), summed in log space, the
    # positive and the negative parts of g apart (PyTorch's way): nothing overflows.
    x, axis, reverse = ins[0], attrs["axis"], attrs["reverse"]
    graph = x.graph
    ninf, one = graph.constant(-float("inf"), x.dtype), graph.constant(1, x.dtype)

    def part(positive: Tensor) -> Tensor:
        logs = where(positive, where(positive, g.abs(), one).log() - out, ninf)
        back = graph.apply("logcumsumexp", (logs,), {"axis": axis, "reverse": not reverse})
        return (back + x).exp()

    return (part(g > 0) - part(g < 0),)
