"""Gradient rules of the elementwise ops: arithmetic, unary functions, ``where``, ``cast``.

Binary rules may return a gradient shaped like the broadcast result;
`asgrad.autograd.grad` sums it down to each operand's shape. Comparisons and
``sign`` are piecewise constant (not differentiable) and have no rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor, where
from asgrad.tensor.ops.elementwise import softplus_bounds

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


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
    # As PyTorch: d/da is 0 where b == 0 (not 0 * 0**-1), and d/db is 0 where a == 0
    # and b >= 0 (not 0 * log 0); the masked branch never multiplies into the other.
    a, b = ins
    zero = _zero(g)
    ga = where(b == 0, zero, g * b * a ** (b - 1.0)) if needs[0] else None
    gb = None
    if needs[1]:
        d = g * out * a.log()
        gb = where(a == 0, where(b >= 0, zero, d), d)
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


@rule("cast")
def _cast(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.cast(ins[0].dtype),)


# -- unary -------------------------------------------------------------------------------------
def _unary(op: str, fn: Callable[[Tensor, Tensor, Tensor, Mapping[str, Any]], Tensor]) -> None:
    def unary_rule(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
        return (fn(g, out, ins[0], attrs),)

    rule(op)(unary_rule)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_backward(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    # One backward op (erf and exp computed once); its own rule below is in graph ops.
    approximate = attrs["approximate"]
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
    approximate = attrs["approximate"]
    gg = x.graph.apply("gelu_backward", (h, x), {"approximate": approximate}) if needs[0] else None
    gx = h * g * _gelu_second(x, approximate) if needs[1] else None
    return gg, gx


def _clamp_grad(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    zero = _zero(g)
    if attrs["min"] is not None:
        g = where(x < attrs["min"], zero, g)
    if attrs["max"] is not None:
        g = where(x > attrs["max"], zero, g)
    return g


def _silu_grad(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    s = x.sigmoid()
    return g * (s * (1.0 + x * (1.0 - s)))


def _softplus_grad(g: Tensor, out: Tensor, x: Tensor, attrs: Mapping[str, Any]) -> Tensor:
    # The kernel's own rule: 1 where softplus is x (beta x > 20), else sigmoid(beta x),
    # x clipped as the kernel clips it so that beta x never overflows.
    beta = float(attrs["beta"])
    low, high = softplus_bounds(beta)
    above = x > high if beta > 0 else x < low
    return where(above, g, g * (x.clamp(min=low, max=high) * beta).sigmoid())


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
_unary("softplus", _softplus_grad)
_unary("clamp", _clamp_grad)
