"""Checks of the values handed to asgrad's entry points, with errors that say what was wrong.

>>> from asgrad.tensor import Graph
>>> x = Graph().input("x", (2,))
>>> len(require_tensors([x, x * 2.0], "evaluate"))
2
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentTypeError

__all__ = ["require_tensor", "require_tensors"]


def require_tensor(value: object, what: str) -> Tensor:
    """``value`` if it is a [`Tensor`][asgrad.tensor.Tensor], else an
    [`ArgumentTypeError`][asgrad.tensor.ArgumentTypeError]."""
    if not isinstance(value, Tensor):
        raise ArgumentTypeError(
            f"{what} must be a Tensor of a graph, got {type(value).__name__}; build it from"
            " graph.input/parameter/constant (arrays are fed at run time, not passed here)"
        )
    return value


def require_tensors(values: object, what: str) -> list[Tensor]:
    """``values`` (a Tensor or a sequence of Tensors) as a list, else an error naming the item."""
    if isinstance(values, Tensor):
        return [values]
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise ArgumentTypeError(
            f"{what} takes a Tensor or a list of Tensors, got {type(values).__name__}"
        )
    return [require_tensor(v, f"{what}: item {i}") for i, v in enumerate(values)]
