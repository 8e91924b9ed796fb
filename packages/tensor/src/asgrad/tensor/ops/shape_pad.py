"""``pad``: constant, reflect, replicate and circular padding of any axes, negative
widths cropping; an op that expands into slices and gathers of constant indices.

``pad`` holds one ``(before, after)`` pair per axis. A negative width removes that
many elements from its side first; the positive widths are then filled by ``mode``:
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
from asgrad.tensor.ops._common import randn
from asgrad.tensor.ops.shape_expand import axis_slice, gather_const, shape_expand_op
from asgrad.tensor.registry import Attrs, OpCase, TensorType

if TYPE_CHECKING:
    from asgrad.tensor.tensor import Tensor

MODES = ("constant", "reflect", "replicate", "circular")
Pairs = tuple[tuple[int, int], ...]


def _cropped(n: int, before: int, after: int) -> int:
    return n - max(-before, 0) - max(-after, 0)


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
        m = _cropped(n, before, after)
        if m < 0:
            raise ShapeError(f"pad ({before}, {after}) crops more than axis {axis}'s {n} elements")
        grow = max(before, 0), max(after, 0)
        if any(grow) and mode == "reflect" and max(grow) >= m:
            raise ShapeError(
                f"reflect padding of ({before}, {after}) needs more than {max(grow)} elements"
                f" on axis {axis}, which has {m}; pad less or use mode='replicate'"
            )
        if any(grow) and mode == "circular" and max(grow) > m:
            raise ShapeError(
                f"circular padding of ({before}, {after}) wraps more than axis {axis}'s {m}"
                " elements; pad at most the axis' size"
            )
        if any(grow) and mode == "replicate" and m == 0:
            raise ShapeError(f"replicate padding of an empty axis {axis}: no element to repeat")
        shape.append(m + grow[0] + grow[1])
    return TensorType(tuple(shape), t.dtype)


_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad(x: np.ndarray, pad: Pairs, mode: str, value: float = 0.0) -> np.ndarray:
    crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(pad, x.shape, strict=True))
    x = x[crop]
    widths = [(max(b, 0), max(a, 0)) for b, a in pad]
    if mode == "constant":
        out: np.ndarray = np.pad(x, widths, mode="constant", constant_values=value)
        return out
    return np.asarray(np.pad(x, widths, mode=_NUMPY_MODES[mode]))  # type: ignore[call-overload]


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


def _expand_pad(x: Tensor, pad: Pairs, mode: str, value: float = 0.0) -> Tensor:
    for axis, (before, after) in enumerate(pad):
        n = x.shape[axis]
        if before < 0 or after < 0:
            x = axis_slice(x, axis, slice(max(-before, 0), n - max(-after, 0)))
            n = x.shape[axis]
        before, after = max(before, 0), max(after, 0)
        if not (before or after):
            continue
        if mode == "constant" and n == 0:
            return _pad_empty(x, pad, axis, value)
        x = gather_const(x, source_positions(n, before, after, mode), axis)
        if mode == "constant":
            inside = np.zeros((n + before + after,) + (1,) * (x.ndim - axis - 1), bool)
            inside[before : before + n] = True
            cond = x.graph.constant(inside, "bool")
            fill = x.graph.constant(value, x.dtype)
            x = x.graph.apply("where", (cond, x, fill), {})
    return x


def _pad_empty(x: Tensor, pad: Pairs, axis: int, value: float) -> Tensor:
    """Constant padding of ``axis``, cropped empty: every element is ``value``."""
    grown = max(pad[axis][0], 0) + max(pad[axis][1], 0)
    later = zip(pad[axis + 1 :], x.shape[axis + 1 :], strict=True)
    rest = tuple(_cropped(n, b, a) + max(b, 0) + max(a, 0) for (b, a), n in later)
    return x.graph.constant(np.full((*x.shape[:axis], grown, *rest), value), x.dtype)


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
    ]


shape_expand_op(
    "pad",
    _infer_pad,
    _pad,
    _pad_cases,
    "constant/reflect/replicate/circular padding; negative widths crop",
    _expand_pad,
)
