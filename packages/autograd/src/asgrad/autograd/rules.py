"""Gradient rules (vector-Jacobian products), one per differentiable op, in graph ops.

Each rule gets the incoming gradient ``g`` (shaped like the op's output), the op's
output, its inputs and attributes, and which inputs need a gradient; it returns one
gradient (or None) per input. Rules are written in graph ops, so gradients are
graphs too and can be differentiated again. Rules may return a gradient shaped like
the broadcast result; :func:`asgrad.autograd.grad` sums it down to the operand's
shape at every node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from asgrad.tensor import Tensor, where
from asgrad.tensor.errors import GraphError

Grads = Sequence[Tensor | None]
Ins = tuple[Tensor, ...]
Attrs = Mapping[str, Any]
Needs = tuple[bool, ...]
Rule = Callable[[Tensor, Tensor, Ins, Attrs, Needs], Grads]

RULES: dict[str, Rule] = {}


def rule(*ops: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the gradient rule of ``ops``."""

    def register(fn: Rule) -> Rule:
        for op in ops:
            if op in RULES:
                raise GraphError(f"op {op!r} already has a gradient rule")
            RULES[op] = fn
        return fn

    return register


def get_rule(op: str) -> Rule | None:
    """The gradient rule of ``op``, or None."""
    return RULES.get(op)


def _expand(g: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    return g if keepdims or not axes else g.expand_dims(axes)


def _unreduce(g: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    """The gradient of a reduction broadcast back to the shape of ``x``."""
    expanded = _expand(g, tuple(attrs["axis"]), bool(attrs.get("keepdims", False)))
    return x.graph.apply("broadcast_like", (expanded, x))


def _zero(like: Tensor) -> Tensor:
    return like.graph.constant(0, like.dtype)


# -- arithmetic --------------------------------------------------------------------------------
@rule("add")
def _add(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g, g


@rule("sub")
def _sub(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g, (-g if needs[1] else None)


@rule("mul")
def _mul(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    a, b = ins
    return (g * b if needs[0] else None), (g * a if needs[1] else None)


@rule("div")
def _div(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    b = ins[1]
    ga = g / b if needs[0] else None
    gb = -(g * out) / b if needs[1] else None
    return ga, gb


@rule("pow")
def _pow(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    a, b = ins
    ga = g * b * a ** (b - 1.0) if needs[0] else None
    gb = g * out * a.log() if needs[1] else None
    return ga, gb


def _minmax(g: Tensor, ins: Ins, first_wins: Callable[[Tensor, Tensor], Tensor]) -> Grads:
    a, b = ins
    half = g * 0.5
    ga = where(first_wins(a, b), g, where(a == b, half, _zero(g)))
    gb = where(first_wins(b, a), g, where(a == b, half, _zero(g)))
    return ga, gb


@rule("maximum")
def _maximum(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return _minmax(g, ins, lambda x, y: x > y)


@rule("minimum")
def _minimum(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return _minmax(g, ins, lambda x, y: x < y)


@rule("where")
def _where(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    cond = ins[0]
    zero = _zero(g)
    return (
        None,
        where(cond, g, zero) if needs[1] else None,
        where(cond, zero, g) if needs[2] else None,
    )


# -- unary -------------------------------------------------------------------------------------
def _unary(op: str, fn: Callable[[Tensor, Tensor, Tensor, Mapping[str, Any]], Tensor]) -> None:
    def unary_rule(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
        return (fn(g, out, ins[0], attrs),)

    rule(op)(unary_rule)


_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_backward(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    # One fused op (erf and exp computed once); its own rule below is in graph ops.
    approximate = attrs.get("approximate", "none")
    return x.graph.apply("gelu_backward", (g, x), {"approximate": approximate})


def _gelu_second(x: Tensor, approximate: str) -> Tensor:
    """GELU''(x) in graph ops."""
    if approximate == "tanh":
        # u = k (x + a x^3), t = tanh(u), s = 1 - t^2:
        # GELU'' = s (u' - x t u'^2 + x u'' / 2), u' = k (1 + 3 a x^2), u'' = 6 k a x
        x2 = x * x
        t = (_SQRT_2_OVER_PI * (x + 0.044715 * x * x2)).tanh()
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x2)
        d2u = x * (6.0 * 0.044715 * _SQRT_2_OVER_PI)
        return (1.0 - t * t) * (du - x * t * du * du + 0.5 * x * d2u)
    # phi(x) (2 - x^2)
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return pdf * (2.0 - x * x)


@rule("gelu_backward")
def _gelu_backward_rule(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # out = g * GELU'(x): d/dg = GELU'(x), d/dx = g * GELU''(x)
    g, x = ins
    approximate = attrs.get("approximate", "none")
    gg = x.graph.apply("gelu_backward", (h, x), {"approximate": approximate}) if needs[0] else None
    gx = h * g * _gelu_second(x, approximate) if needs[1] else None
    return gg, gx


def _clamp_grad(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    zero = _zero(g)
    if attrs.get("min") is not None:
        g = where(x < attrs["min"], zero, g)
    if attrs.get("max") is not None:
        g = where(x > attrs["max"], zero, g)
    return g


def _silu_grad(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    s = x.sigmoid()
    return g * (s * (1.0 + x * (1.0 - s)))


_unary("neg", lambda g, out, x, a: -g)
_unary("exp", lambda g, out, x, a: g * out)
_unary("log", lambda g, out, x, a: g / x)
_unary("sqrt", lambda g, out, x, a: g * 0.5 / out)
_unary("abs", lambda g, out, x, a: g * x.sign())
_unary("sin", lambda g, out, x, a: g * x.cos())
_unary("cos", lambda g, out, x, a: -(g * x.sin()))
_unary("tanh", lambda g, out, x, a: g * (1.0 - out * out))
_unary("sigmoid", lambda g, out, x, a: g * out * (1.0 - out))
_unary("relu", lambda g, out, x, a: where(x > 0, g, _zero(g)))
_unary("leaky_relu", lambda g, out, x, a: where(x > 0, g, g * a.get("alpha", 0.01)))
_unary("gelu", _gelu_backward)
_unary("erf", lambda g, out, x, a: g * (x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)))
_unary("silu", _silu_grad)
_unary("elu", lambda g, out, x, a: where(x > 0, g, g * (out + a.get("alpha", 1.0))))
_unary("softplus", lambda g, out, x, a: g * (x * a.get("beta", 1.0)).sigmoid())
_unary("clamp", _clamp_grad)


@rule("cast")
def _cast(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.cast(ins[0].dtype),)


# -- reductions --------------------------------------------------------------------------------
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
    ratio = x.graph.apply("size_ratio", (out, x))
    centered = x - x.mean(axis=attrs["axis"], keepdims=True)
    return (_unreduce(g * ratio, x, attrs) * centered * 2.0,)


@rule("max", "min")
def _max(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    axes, keep = tuple(attrs["axis"]), bool(attrs.get("keepdims", False))
    hit = x == x.graph.apply("broadcast_like", (_expand(out, axes, keep), x))
    share = hit.cast(x.dtype)
    count = share.sum(axis=axes, keepdims=True)
    gx = x.graph.apply("broadcast_like", (_expand(g, axes, keep) / count, x))
    return (gx * share,)


@rule("softmax")
def _softmax(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"]
    return (out * (g - (g * out).sum(axis=axis, keepdims=True)),)


@rule("log_softmax")
def _log_softmax(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"]
    return (g - out.exp() * g.sum(axis=axis, keepdims=True),)


# -- linear algebra ----------------------------------------------------------------------------
@rule("matmul")
def _matmul(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    a, b = ins
    ga = g @ b.swapaxes(-1, -2) if needs[0] else None
    gb = a.swapaxes(-1, -2) @ g if needs[1] else None
    return ga, gb


# -- shape -------------------------------------------------------------------------------------
@rule("reshape", "reshape_like")
def _reshape(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    gx = g.graph.apply("reshape_like", (g, ins[0]))
    return (gx, None) if len(ins) == 2 else (gx,)


@rule("transpose")
def _transpose(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axes = tuple(attrs["axes"])
    inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
    return (g.transpose(inverse),)


@rule("broadcast_to")
def _broadcast_to(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g,)  # grad() sums it down to the operand's shape


@rule("broadcast_like")
def _broadcast_like(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g, None


@rule("sum_to_like")
def _sum_to_like(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g.graph.apply("broadcast_like", (g, ins[0])), None


@rule("expand_dims")
def _expand_dims(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.squeeze(tuple(attrs["axis"])),)


@rule("squeeze")
def _squeeze(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.expand_dims(tuple(attrs["axis"])),)


@rule("slice")
def _slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.graph.apply("scatter_slice", (g, ins[0]), {"index": attrs["index"]}),)


@rule("scatter_slice")
def _scatter_slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g.graph.apply("slice", (g,), {"index": attrs["index"]}), None


@rule("concat")
def _concat(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"] % out.ndim
    grads: list[Tensor | None] = []
    start = 0
    for x, need in zip(ins, needs, strict=True):
        stop = start + x.shape[axis]
        index = (slice(None),) * axis + (slice(start, stop),)
        grads.append(g.graph.apply("slice", (g,), {"index": index}) if need else None)
        start = stop
    return grads


@rule("gather")
def _gather(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, idx = ins
    return g.graph.apply("scatter_add", (g, idx, x), {"axis": attrs["axis"]}), None


@rule("scatter_add")
def _scatter_add(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    _, idx, _ = ins
    return g.gather(idx, axis=attrs["axis"]), None, None
