"""Gradient rules of the indexing ops: ``slice``/``scatter_slice``, ``gather``/``scatter_add``.

The ops come in adjoint pairs, so each rule emits its partner. Indices get no
gradient, and ``one_hot`` (of integer indices) has no rule.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("slice")
def _slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.graph.apply("scatter_slice", (g, ins[0]), {"index": attrs["index"]}),)


@rule("scatter_slice")
def _scatter_slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g.graph.apply("slice", (g,), {"index": attrs["index"]}), None


@rule("gather")
def _gather(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, idx = ins
    return g.graph.apply("scatter_add", (g, idx, x), {"axis": attrs["axis"]}), None


@rule("scatter_add")
def _scatter_add(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    _, idx, _ = ins
    return g.gather(idx, axis=attrs["axis"]), None, None


# -- along one axis (PyTorch's gather/scatter): take_along_axis, scatter_add_along, scatter_reduce
def _along(t: Tensor, idx: Tensor, axis: int) -> Tensor:
    return t.graph.apply("take_along_axis", (t, idx), {"axis": axis})


def _scatter_along(v: Tensor, idx: Tensor, like: Tensor, axis: int) -> Tensor:
    return v.graph.apply("scatter_add_along", (v, idx, like), {"axis": axis})


def _full_like(value: float, like: Tensor) -> Tensor:
    return like.graph.apply("broadcast_like", (like.graph.constant(value, like.dtype), like))


def _where(cond: Tensor, a: Tensor | float, b: Tensor | float) -> Tensor:
    like = a if isinstance(a, Tensor) else b
    assert isinstance(like, Tensor)
    return cond.graph.apply("where", (cond, like._lift(a), like._lift(b)))


@rule("take_along_axis")
def _take_along_axis(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, idx = ins
    return _scatter_along(g, idx, x, attrs["axis"]), None


@rule("scatter_add_along")
def _scatter_add_along(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    _, idx, _ = ins
    return _along(g, idx, attrs["axis"]), None, None


def _mask(cond: Tensor, like: Tensor) -> Tensor:
    """``cond`` as 1.0/0.0 of ``like``'s dtype."""
    return cond.cast(like.dtype)


def _others_product(v: Tensor, zeros: Tensor, nonzero_product: Tensor) -> Tensor:
    """The product of the factors other than ``v`` at its position: ``nonzero_product``
    (the product of the nonzero factors) over ``v`` when no factor is zero, over nothing
    when ``v`` is the one zero, else 0."""
    is_zero = v == 0.0
    one_zero = _where(is_zero, _where(zeros == 1.0, nonzero_product, 0.0), 0.0)
    return _where(zeros == 0.0, nonzero_product / _where(is_zero, 1.0, v), one_zero)


@rule("scatter_reduce")
def _scatter_reduce(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, idx, src = ins
    axis, reduce, include = attrs["axis"], attrs["reduce"], bool(attrs["include_self"])
    count = _scatter_along(_full_like(1.0, src), idx, x, axis)
    untouched = count == 0.0
    if reduce == "sum":
        return (g if include else _where(untouched, g, 0.0)), None, _along(g, idx, axis)
    if reduce == "mean":
        if include:
            share = g / (count + 1.0)
            return share, None, _along(share, idx, axis)
        share = g / _where(untouched, 1.0, count)
        return _where(untouched, g, 0.0), None, _along(share, idx, axis)
    if reduce == "prod":
        zero_x = _mask(x == 0.0, x) if include else _full_like(0.0, x)
        zeros = _scatter_along(_mask(src == 0.0, src), idx, x, axis) + zero_x
        nonzero = x.graph.apply(
            "scatter_reduce",
            (_where(x == 0.0, 1.0, x), idx, _where(src == 0.0, 1.0, src)),
            dict(attrs),
        )
        gx = g * _others_product(x, zeros, nonzero) if include else _where(untouched, g, 0.0)
        gsrc = _along(g, idx, axis) * _others_product(
            src, _along(zeros, idx, axis), _along(nonzero, idx, axis)
        )
        return gx, None, gsrc
    # amax, amin: split evenly between the values equal to the result (PyTorch's rule)
    hit_src = _mask(_along(out, idx, axis) == src, src)
    hit_x = _mask(x == out, x) if include else _mask(untouched, x)
    share = g / (_scatter_along(hit_src, idx, x, axis) + hit_x)
    return share * hit_x, None, _along(share, idx, axis) * hit_src
