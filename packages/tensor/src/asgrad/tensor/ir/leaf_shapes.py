"""Checks of the shapes users declare for inputs and parameters."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import check_size
from asgrad.tensor.ir.registry import Shape

__all__ = ["check_shape", "free_axes"]


def check_shape(shape: Sequence[int], what: str, *, free_hint: bool = False) -> Shape:
    """``shape`` as a tuple of non-negative ints whose element count fits int64."""
    if free_hint and not isinstance(shape, str | bytes) and any(d is None for d in shape):
        raise ShapeError(
            f"{what}: shape {list(shape)} has None; give every axis a size (used to infer"
            " the graph's shapes) and list the axes whose size may change per run in"
            " free=, e.g. free=(0,)"
        )
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ShapeError(f"{what}: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"{what}: shape {list(out)} has a negative size")
    check_size(out, what)
    return out


def free_axes(free: Sequence[int] | None, rank: int, what: str) -> tuple[int, ...]:
    """The sorted, non-negative axes of ``free`` (default: the leading axis)."""
    if free is None:
        return (0,) if rank else ()
    if isinstance(free, int | str | bytes):
        raise ShapeError(f"{what}: free must be a sequence of axes, e.g. free=(0,); got {free!r}")
    axes: set[int] = set()
    for axis in free:
        if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
            raise ShapeError(f"{what}: free axes must be integers, got {axis!r}")
        if not -rank <= axis < rank:
            raise ShapeError(f"{what}: free axis {axis} is out of range for rank {rank}")
        axes.add(int(axis) % rank)
    return tuple(sorted(axes))
