"""Checks of the sizes and options that layers are constructed with.

A layer given a size that is not a positive integer raises an
[`ArgumentError`][asgrad.tensor.ArgumentError] (or
[`ArgumentTypeError`][asgrad.tensor.ArgumentTypeError] for a float or a string) naming the layer and
the argument, not a ``ZeroDivisionError`` from its initializer.

>>> positive_int(3, "Linear", "in_features")
3
"""

from __future__ import annotations

import operator

import numpy as np

from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, ShapeError

__all__ = ["IntPair", "as_pair", "positive_int", "probability"]

IntPair = int | tuple[int, int]


def _int(value: object, layer: str, name: str) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{layer}: {name} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]  # checked: TypeError below
    except TypeError:
        raise ArgumentTypeError(
            f"{layer}: {name} must be an integer, got {value!r} ({type(value).__name__})"
        ) from None


def positive_int(value: object, layer: str, name: str) -> int:
    """``value`` if it is an integer >= 1, else an error naming ``layer`` and ``name``."""
    out = _int(value, layer, name)
    if out < 1:
        raise ArgumentError(f"{layer}: {name} must be a positive integer (a size >= 1), got {out}")
    return out


def probability(p: object, layer: str) -> float:
    """A dropout probability in ``[0, 1)``."""
    if isinstance(p, bool) or not isinstance(p, int | float | np.floating | np.integer):
        raise ArgumentTypeError(f"{layer} probability must be a number, got {p!r}")
    if not 0.0 <= p < 1.0:
        raise ArgumentError(f"{layer} probability must be in [0, 1), got {p}")
    return float(p)


def as_pair(value: object, name: str, minimum: int = 0) -> tuple[int, int]:
    """``value`` as an ``(h, w)`` pair of ints, each at least ``minimum``."""
    if isinstance(value, int | np.integer):
        out = (_int(value, name, "size"), _int(value, name, "size"))
    elif isinstance(value, tuple | list) and len(value) == 2:
        out = (_int(value[0], name, "each size"), _int(value[1], name, "each size"))
    else:
        raise ArgumentTypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if min(out) < minimum:
        raise ShapeError(f"{name} must be an int >= {minimum} or a pair of them, got {value!r}")
    return out
