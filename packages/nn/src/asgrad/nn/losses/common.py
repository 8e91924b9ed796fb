"""What every loss shares: the reduction and the argument checks."""

from __future__ import annotations

from typing import Literal

import numpy as np

from asgrad.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import is_float

__all__ = [
    "KLReduction",
    "Reduction",
    "Weight",
    "check_float_input",
    "check_reduction",
    "like_input",
    "reduce",
    "weight_tensor",
]

Reduction = Literal["mean", "sum", "none"]
KLReduction = Literal["mean", "sum", "none", "batchmean"]
Weight = Tensor | np.ndarray | None


def reduce(loss: Tensor, reduction: str) -> Tensor:
    """Apply ``reduction`` (``"mean"``, ``"sum"`` or ``"none"``) to per-element losses."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ArgumentError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def check_reduction(
    name: str, reduction: str, allowed: tuple[str, ...] = ("mean", "sum", "none")
) -> None:
    """Raise unless ``reduction`` is one of ``allowed``."""
    if reduction not in allowed:
        raise ArgumentError(
            f"{name}: reduction must be one of {', '.join(map(repr, allowed))}, got {reduction!r}"
        )


def check_float_input(name: str, what: str, t: Tensor) -> None:
    """Raise unless ``t`` is a float Tensor."""
    if not isinstance(t, Tensor):
        raise ArgumentTypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if not is_float(t.dtype):
        raise DTypeError(
            f"{name}: {what} must be float32 or float64, got {t.dtype};"
            " cast it with .cast('float32')"
        )


def like_input(
    name: str, what: str, t: Tensor, input: Tensor, *, same_shape: bool = True
) -> Tensor:  # PyTorch's name
    """``t`` checked against ``input``: same shape (if asked) and dtype (ints/bools are cast)."""
    if not isinstance(t, Tensor):
        raise ArgumentTypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if same_shape and t.shape != input.shape:
        raise ShapeError(
            f"{name}: input {list(input.shape)} and {what} {list(t.shape)} differ;"
            f" reshape the {what} to the input's shape"
        )
    if is_float(t.dtype) and t.dtype != input.dtype:
        raise DTypeError(
            f"{name}: input is {input.dtype} but {what} is {t.dtype}; cast the {what}"
            f" with .cast({input.dtype!r})"
        )
    return t if t.dtype == input.dtype else t.cast(input.dtype)


def weight_tensor(
    name: str, weight: Weight, input: Tensor, shape: tuple[int, ...] | None = None
) -> Tensor | None:
    """``weight`` (an array or a Tensor) as a Tensor of ``input``'s dtype, shape checked."""
    if weight is None:
        return None
    w = (
        weight
        if isinstance(weight, Tensor)
        else input.graph.constant(np.asarray(weight), input.dtype)
    )
    if shape is not None and w.shape != shape:
        raise ShapeError(
            f"{name}: weight must have shape {list(shape)} (one per class), got {list(w.shape)}"
        )
    return like_input(name, "weight", w, input, same_shape=False)
