"""Reductions that expand into other ops: ``std``, ``logsumexp``, ``any``,
``all``. Their gradients and GPU kernels are those of the ops they build; their
shape rules and numpy references are in `asgrad.tensor.ops.reduction`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

Axes = tuple[int, ...]


def std(x: Tensor, axis: Axes, keepdims: bool, correction: float) -> Tensor:
    """``sqrt(var(x))``: the gradient is ``var``'s over ``2 std``."""
    var = x.graph.apply("var", (x,), {"axis": axis, "keepdims": keepdims, "correction": correction})
    return var.sqrt()


def logsumexp(x: Tensor, axis: Axes, keepdims: bool) -> Tensor:
    """``m + log(sum(e**(x - m)))`` with ``m`` the max (0 where it is not finite, so that
    an all ``-inf`` row gives ``-inf``); ``m`` carries no gradient, so the gradient is
    the softmax of ``x`` over the axes."""
    g = x.graph
    m = g.apply("max", (x,), {"axis": axis, "keepdims": True}).detach()
    m = g.apply("where", (g.apply("isfinite", (m,)), m, g.constant(0, x.dtype)))
    total = (x - m).exp().sum(axis=axis, keepdims=True).log() + m
    return total if keepdims or not axis else total.squeeze(axis)


def _count(truth: Tensor, axis: Axes, keepdims: bool) -> Tensor:
    return truth.cast("int32").sum(axis=axis, keepdims=keepdims)


def _truth(x: Tensor) -> Tensor:
    return x if x.dtype == "bool" else x != 0


def any_(x: Tensor, axis: Axes, keepdims: bool) -> Tensor:
    """Whether some value along the axes is nonzero: a count of them above 0."""
    return _count(_truth(x), axis, keepdims) > 0


def all_(x: Tensor, axis: Axes, keepdims: bool) -> Tensor:
    """Whether every value along the axes is nonzero: no zero among them."""
    return _count(~_truth(x), axis, keepdims) == 0
