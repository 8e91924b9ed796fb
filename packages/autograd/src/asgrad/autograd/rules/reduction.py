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
    expanded = _expand(g, tuple(attrs["axis"]), bool(attrs.get("keepdims", False)))
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
    correction = float(attrs.get("correction", 0))
    if correction:  # 1 / (n - correction)
        ratio = ratio / (1.0 - ratio * correction)
    centered = x - x.mean(axis=attrs["axis"], keepdims=True)
    return (_unreduce(g * ratio, x, attrs) * centered * 2.0,)


@rule("max", "min")
def _max(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # Ties share the gradient equally.
    x = ins[0]
    axes, keep = tuple(attrs["axis"]), bool(attrs.get("keepdims", False))
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
    at_zero = where(zero, others, x.graph.constant(0, x.dtype))
    d = where(zeros == 0, others / nonzero, where(zeros == 1, at_zero, at_zero * 0.0))
    return (_unreduce(g, x, attrs) * d,)
