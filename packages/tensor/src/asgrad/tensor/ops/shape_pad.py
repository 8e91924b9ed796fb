"""``pad``: constant, reflect, replicate and circular padding of any axes, negative
widths cropping; an op that expands into slices and gathers of constant indices.

``pad`` holds one ``(before, after)`` pair per axis; element ``k`` of a padded axis
is the input's position ``k - before``, and a negative width removes that many
elements from its side. A position outside the input is filled by ``mode``, about
the input's own edges (as PyTorch: ``(-1, 3)`` reflects about the last element;
``circular`` alone wraps the input as cropped, again as PyTorch):
``constant`` (``value``), ``reflect`` (mirrored about the edge element, which is not
repeated: PyTorch's ``reflect``, numpy's ``reflect``), ``replicate`` (the edge
element: numpy's ``edge``) or ``circular`` (wrapped around: numpy's ``wrap``). Each
padded axis is one gather of the axis' elements at constant positions, so the
gradient (a scatter-add) and the GPU kernels are the gather's; the other axes,
the batch axis among them, may change size per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.errors import ArgumentError, ShapeError
from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.free_sizes import free_axes_of
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, TensorType
from asgrad.tensor.ops.shape_expand import axis_slice, gather_const, shape_expand_op

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

MODES = ("constant", "reflect", "replicate", "circular")
Pairs = tuple[tuple[int, int], ...]


def _infer_pad(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    pad: Pairs = attrs["pad"]
    mode = attrs["mode"]
    if mode not in MODES:
        raise ArgumentError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if len(pad) != len(t.shape):
        raise ShapeError(
            f"pad has {len(pad)} (before, after) pairs for a value of rank {len(t.shape)}"
        )
    shape = []
    for axis, ((before, after), n) in enumerate(zip(pad, t.shape, strict=True)):
        if n + before + after < 0 or -before > n or -after > n:
            raise ShapeError(f"pad ({before}, {after}) crops more than axis {axis}'s {n} elements")
        grow = max(before, after, 0)
        kept = n - max(-before, 0) - max(-after, 0)
        if grow and mode == "reflect" and grow >= n:
            raise ShapeError(
                f"reflect padding of ({before}, {after}) needs more than {grow} elements on"
                f" axis {axis}, which has {n}; pad less or use mode='replicate'"
            )
        if grow and mode == "circular" and grow > kept:
            raise ShapeError(
                f"circular padding of ({before}, {after}) wraps more than the {kept} elements"
                f" kept of axis {axis}; pad at most that many"
            )
        if grow and mode == "replicate" and n == 0:
            raise ShapeError(f"replicate padding of an empty axis {axis}: no element to repeat")
        shape.append(n + before + after)
    return TensorType(tuple(shape), t.dtype)


_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _crop(x: np.ndarray, pad: Pairs) -> np.ndarray:
    return x[
        tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(pad, x.shape, strict=True))
    ]


def _pad(x: np.ndarray, pad: Pairs, mode: str, value: float) -> np.ndarray:
    """Pad by the positive widths (numpy's modes), then crop by the negative ones
    (``circular``: crop first)."""
    if mode == "circular":
        x = _crop(x, pad)
    widths = [(max(b, 0), max(a, 0)) for b, a in pad]
    if mode == "constant":
        out: np.ndarray = np.pad(x, widths, mode="constant", constant_values=value)
    else:
        out = np.asarray(np.pad(x, widths, mode=_NUMPY_MODES[mode]))  # type: ignore[call-overload]
    return out if mode == "circular" else _crop(out, pad)


def source_positions(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of a padded axis of ``n`` elements, the element it copies."""
    i = np.arange(-before, n + after)
    if mode == "reflect":
        period = 2 * (n - 1)
        i = np.abs(i) % period if period else np.zeros_like(i)
        return np.where(i >= n, period - i, i)
    if mode == "circular":
        return i % n
    return np.clip(i, 0, n - 1)  # replicate; constant masks the outside


def _take(x: Tensor, axis: int, item: slice, positions: Sequence[int]) -> Tensor:
    """``x[..., item, ...]`` at ``positions`` along ``axis``: a gather, so a fed size too
    small for a position is an ``OutOfRangeError``, never a shorter result."""
    idx = x.graph.constant(np.asarray(positions, np.int64), "int64")
    return x.graph.apply("gather", (axis_slice(x, axis, item), idx), {"axis": axis})


def _pad_free_axis(x: Tensor, axis: int, before: int, after: int, mode: str) -> Tensor:
    """``x`` padded along ``axis`` from slices counted from its ends, for any fed size."""
    parts = []
    if before and mode == "reflect":  # x[before], ..., x[1]
        parts.append(_take(x, axis, slice(0, before + 1), range(before, 0, -1)))
    elif before and mode == "replicate":
        parts.append(_take(x, axis, slice(0, 1), [0] * before))
    elif before:  # circular: the last `before` elements
        parts.append(_take(x, axis, slice(-before, None), range(before)))
    parts.append(x)
    if after and mode == "reflect":  # x[n-2], ..., x[n-1-after]; x[n-1-after] must exist
        mirrored = _take(x, axis, slice(-after - 1, None), range(after, -1, -1))
        parts.append(axis_slice(mirrored, axis, slice(1, None)))
    elif after and mode == "replicate":
        parts.append(_take(x, axis, slice(-1, None), [0] * after))
    elif after:  # circular: the first `after` elements
        parts.append(_take(x, axis, slice(0, after), range(after)))
    return x.graph.apply("concat", tuple(parts), {"axis": axis}) if len(parts) > 1 else x


def _expand_pad(x: Tensor, pad: Pairs, mode: str, value: float) -> Tensor:
    free = free_axes_of(x.node)
    for axis, (before, after) in enumerate(pad):
        n = x.shape[axis]
        growing = mode != "constant" and min(before, after) >= 0 and max(before, after) > 0
        if growing and (free is None or axis in free):  # polymorphic in the axis' size
            x = _pad_free_axis(x, axis, before, after, mode)
            continue
        if (before < 0 or after < 0) and (mode == "circular" or max(before, after) <= 0):
            x = axis_slice(x, axis, slice(max(-before, 0), n - max(-after, 0)))
            n, before, after = x.shape[axis], max(before, 0), max(after, 0)
        if before <= 0 and after <= 0:
            continue
        if mode == "constant" and n == 0:
            return _pad_empty(x, pad, axis, value)
        positions = np.arange(-before, n + after)
        x = gather_const(x, source_positions(n, before, after, mode), axis)
        if mode == "constant":
            inside = (positions >= 0) & (positions < n)
            cond = x.graph.constant(inside.reshape((-1,) + (1,) * (x.ndim - axis - 1)), "bool")
            fill = x.graph.constant(value, x.dtype)
            x = x.graph.apply("where", (cond, x, fill), {})
    return x


def _pad_empty(x: Tensor, pad: Pairs, axis: int, value: float) -> Tensor:
    """Constant padding of an empty ``axis``: every element is ``value``."""
    later = zip(pad[axis:], x.shape[axis:], strict=True)
    rest = tuple(n + b + a for (b, a), n in later)
    return x.graph.constant(np.full((*x.shape[:axis], *rest), value), x.dtype)


def _pad_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 2, 5, 4)
    return [
        OpCase((x,), {"pad": ((0, 0), (1, 2), (3, 0)), "mode": "constant", "value": 0.5}),
        OpCase((x,), {"pad": ((0, 0), (2, 4), (1, 1)), "mode": "reflect", "value": 0.0}),
        OpCase((x,), {"pad": ((1, 0), (3, 3), (0, 2)), "mode": "replicate", "value": 0.0}),
        OpCase((x,), {"pad": ((0, 0), (5, 1), (2, 3)), "mode": "circular", "value": 0.0}),
        OpCase(
            (x,),
            {"pad": ((0, 0), (-1, 2), (1, -2)), "mode": "constant", "value": -1.0},
            label="crop",
        ),
        OpCase(
            (x,), {"pad": ((0, 0), (-2, -1), (0, 0)), "mode": "reflect", "value": 0.0}, label="crop"
        ),
        OpCase(
            (x,),
            {"pad": ((0, 0), (-1, 3), (2, -1)), "mode": "reflect", "value": 0.0},
            label="crop and pad",
        ),
        OpCase(
            (x,),
            {"pad": ((0, 0), (-1, 3), (2, -1)), "mode": "circular", "value": 0.0},
            label="crop and pad",
        ),
    ]


shape_expand_op(
    "pad",
    _infer_pad,
    _pad,
    _pad_cases,
    "constant/reflect/replicate/circular padding; negative widths crop",
    _expand_pad,
    (
        Attr(name="pad", kind=tuple, doc="(before, after) for each axis"),
        Attr(name="mode", kind=str, doc="constant/reflect/replicate/circular"),
        Attr(name="value", kind=float, default=0.0, doc="the constant mode's fill"),
    ),
)
