"""Gradient rules of the convolutions: a closed family, each member's gradient another.

- ``conv2d(x, w)``: x <- ``conv2d_backward_input(g, w, x)``, w <-
  ``conv2d_backward_weight(x, g)``; those two are bilinear and their gradients are
  ``conv2d`` and each other. ``conv_transpose2d`` is ``conv2d_backward_input`` with
  the roles of input and gradient swapped.

A bias (third input of ``conv2d`` and ``conv_transpose2d``) gets the incoming
gradient summed over batch and space.
"""

from __future__ import annotations

from typing import Any

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, apply, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)

_CONV_KEYS = ("stride", "padding", "dilation", "groups")


def _conv_attrs(attrs: Attrs) -> dict[str, Any]:
    return {k: attrs[k] for k in _CONV_KEYS if k in attrs}


def _bias_grad(g: Tensor) -> Tensor:
    return g.sum(axis=(0, 2, 3))


@rule("conv2d")
def _conv2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, w = ins[0], ins[1]
    conv = _conv_attrs(attrs)
    gx = apply("conv2d_backward_input", (g, w, x), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = apply("conv2d_backward_weight", (x, g), {**conv, "kernel_size": w.shape[2:]})
    if len(ins) == 2:
        return gx, gw
    return gx, gw, (_bias_grad(g) if needs[2] else None)


@rule("conv2d_backward_input")
def _conv2d_backward_input(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # out = A(g, w), linear in each: <h, A(g, w)> = <conv2d(h, w), g>.
    g, w, _ = ins
    conv = _conv_attrs(attrs)
    gg = apply("conv2d", (h, w), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = apply("conv2d_backward_weight", (h, g), {**conv, "kernel_size": w.shape[2:]})
    return gg, gw, None


@rule("conv2d_backward_weight")
def _conv2d_backward_weight(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # out = B(x, g): <h, B(x, g)> = <conv2d(x, h), g>.
    x, g = ins
    conv = _conv_attrs(attrs)
    gx = apply("conv2d_backward_input", (g, h, x), conv) if needs[0] else None
    gg = apply("conv2d", (x, h), conv) if needs[1] else None
    return gx, gg


@rule("conv_transpose2d")
def _conv_transpose2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # y = conv2d_backward_input(x, w) with output size from output_padding.
    x, w = ins[0], ins[1]
    conv = _conv_attrs(attrs)
    gx = apply("conv2d", (g, w), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = apply("conv2d_backward_weight", (g, x), {**conv, "kernel_size": w.shape[2:]})
    if len(ins) == 2:
        return gx, gw
    return gx, gw, (_bias_grad(g) if needs[2] else None)
