"""Gradient rules of the pooling ops: closed families of adjoint pairs.

- ``max_pool2d_backward`` and ``max_pool2d_select`` are adjoint (the argmax
  positions are piecewise constant in x), as are ``avg_pool2d`` and
  ``avg_pool2d_backward``, and the adaptive pair.

The input that only locates the window maxima (or gives the shape) gets no gradient.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, apply, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("max_pool2d")
def _max_pool2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (apply("max_pool2d_backward", (g, ins[0]), attrs),)


@rule("max_pool2d_backward")
def _max_pool2d_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # Linear in g; the argmax positions are piecewise constant in x.
    return apply("max_pool2d_select", (h, ins[1]), attrs), None


@rule("max_pool2d_select")
def _max_pool2d_select(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return apply("max_pool2d_backward", (g, ins[1]), attrs), None


@rule("avg_pool2d")
def _avg_pool2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (apply("avg_pool2d_backward", (g, ins[0]), attrs),)


@rule("avg_pool2d_backward")
def _avg_pool2d_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return apply("avg_pool2d", (h,), attrs), None


@rule("adaptive_avg_pool2d")
def _adaptive(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (apply("adaptive_avg_pool2d_backward", (g, ins[0]), attrs),)


@rule("adaptive_avg_pool2d_backward")
def _adaptive_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return apply("adaptive_avg_pool2d", (h,), attrs), None
