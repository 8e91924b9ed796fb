"""Loss functions on symbolic tensors, with ``reduction="mean" | "sum" | "none"``."""

from __future__ import annotations

from typing import Literal

from asgrad.tensor import Tensor
from asgrad.tensor.dtypes import is_int
from asgrad.tensor.errors import DTypeError, ShapeError

Reduction = Literal["mean", "sum", "none"]


def reduce(loss: Tensor, reduction: Reduction) -> Tensor:
    """Apply a reduction to per-element losses."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(name: str, input: Tensor, target: Tensor) -> None:  # PyTorch's name
    if input.shape != target.shape:
        raise ShapeError(
            f"{name}: input {list(input.shape)} and target {list(target.shape)} differ;"
            " reshape the target to the input's shape"
        )


def mse_loss(input: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Mean squared error, (input - target)**2."""
    _same_shape("mse_loss", input, target)
    d = input - target
    return reduce(d * d, reduction)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    reduction: Reduction = "mean",
    eps: float = 1e-7,
) -> Tensor:
    """BCE on probabilities; ``input`` is clamped to [eps, 1 - eps] before the log."""
    _same_shape("binary_cross_entropy", input, target)
    p = input.clamp(eps, 1.0 - eps)
    return reduce(-(target * p.log() + (1.0 - target) * (1.0 - p).log()), reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    reduction: Reduction = "mean",
) -> Tensor:
    """BCE on logits, stable for any magnitude: max(x, 0) - x*t + log(1 + exp(-|x|))."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    x = input
    loss = x.relu() - x * target + ((-x.abs()).exp() + 1.0).log()
    return reduce(loss, reduction)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    reduction: Reduction = "mean",
    axis: int = -1,
) -> Tensor:
    """Cross-entropy of logits ``input`` against integer class labels ``target``.

    ``input`` is ``(..., C)`` and ``target`` the same shape without the class axis;
    computed through ``log_softmax``, so it is stable for large logits.
    """
    if not is_int(target.dtype):
        raise DTypeError(
            f"cross_entropy: target must hold integer labels, got {target.dtype};"
            " for probability targets use asgrad.nn.functional.cross_entropy with probs"
        )
    if input.ndim < 1 or target.shape != input.shape[:-1]:
        raise ShapeError(
            f"cross_entropy: logits {list(input.shape)} need labels of shape"
            f" {list(input.shape[:-1])}, got {list(target.shape)}"
        )
    logp = input.log_softmax(axis)
    picked = (logp * target.one_hot(input.shape[-1], input.dtype)).sum(axis=-1)
    return reduce(-picked, reduction)
