"""Regression losses: squared, absolute, smooth L1 and Huber errors."""

from __future__ import annotations

from asgrad.nn.losses.common import (
    Reduction,
    check_float_input,
    check_reduction,
    like_input,
    reduce,
)
from asgrad.tensor import Tensor, where
from asgrad.tensor.errors import ArgumentError

__all__ = ["huber_loss", "l1_loss", "mse_loss", "smooth_l1_loss"]


def mse_loss(input: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Mean squared error: ``(input - target)**2``.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(mse_loss(x, y, "sum"), {"x": [1.0, 2.0], "y": [0.0, 0.0]})[0]
    array(5., dtype=float32)
    """
    check_float_input("mse_loss", "input", input)
    check_reduction("mse_loss", reduction)
    d = input - like_input("mse_loss", "target", target, input)
    return reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Mean absolute error: ``|input - target|``.

    >>> from asgrad.nn import l1_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.constant([1.0, 2.0]), g.constant([0.0, 0.0])
    >>> round(float(evaluate(l1_loss(x, y))[0]), 4)
    1.5
    """
    check_float_input("l1_loss", "input", input)
    check_reduction("l1_loss", reduction)
    return reduce((input - like_input("l1_loss", "target", target, input)).abs(), reduction)


def smooth_l1_loss(
    input: Tensor, target: Tensor, reduction: Reduction = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``.

    ``d = input - target``.

    ``beta = 0`` is the L1 loss.

    >>> from asgrad.nn import smooth_l1_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.constant([0.5, 3.0]), g.constant([0.0, 0.0])
    >>> round(float(evaluate(smooth_l1_loss(x, y))[0]), 4)
    1.3125
    """
    check_float_input("smooth_l1_loss", "input", input)
    check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ArgumentError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    z = (input - like_input("smooth_l1_loss", "target", target, input)).abs()
    if beta == 0:
        return reduce(z, reduction)
    return reduce(where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta), reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: Reduction = "mean", delta: float = 1.0
) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``.

    Equal to ``delta * smooth_l1_loss(beta=delta)``.

    >>> from asgrad.nn import huber_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.constant([0.5, 3.0]), g.constant([0.0, 0.0])
    >>> round(float(evaluate(huber_loss(x, y, delta=2.0))[0]), 4)
    2.0625
    """
    check_float_input("huber_loss", "input", input)
    check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ArgumentError(f"huber_loss: delta must be > 0, got {delta}")
    z = (input - like_input("huber_loss", "target", target, input)).abs()
    return reduce(where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta), reduction)
