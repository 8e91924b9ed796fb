"""Resampling (``interpolate``), as gathers and weighted sums along each spatial axis.

Every mode PyTorch's ``F.interpolate`` offers for (N, C, *spatial) inputs is
separable: along each spatial axis the output is a sum of a few gathered input rows,
each times a weight per output position. The index and weight tables depend only on
the sizes and the mode, so they are constants of the graph, and the op expands into
``gather``, ``mul`` and ``add`` (``OpDef.expand``): its gradient (a scatter-add) and
GPU kernels are theirs. The coordinate rules are PyTorch's, including its use of
``1 / scale_factor`` (not in/out) when a scale factor was given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ArgumentError, ShapeError
from asgrad.tensor.ir.common import randn, require_float
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops.shape_expand import refuse_free_axes

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

# The modes, with the number of spatial axes each accepts (None: any).
MODES: dict[str, int | None] = {
    "nearest": None,
    "nearest-exact": None,
    "linear": 1,
    "bilinear": 2,
    "bicubic": 2,
    "trilinear": 3,
}
_CUBIC_A = -0.75  # PyTorch's bicubic coefficient


def _scale(size: int, out: int, align_corners: bool, scale: float | None) -> float:
    """The input step per output position (PyTorch's ``area_pixel_compute_scale``)."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else size / out


def taps(
    mode: str, size: int, out: int, align_corners: bool, scale: float | None
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """The (indices, weights) pairs of one axis: output j is
    ``sum(x[indices[j]] * weights[j])`` over the pairs (no weights: weight 1)."""
    step = _scale(size, out, align_corners, scale)
    dst = np.arange(out, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        shift = 0.5 if mode == "nearest-exact" else 0.0
        index = np.minimum(np.floor((dst + shift) * step), size - 1).astype(np.int64)
        return [(index, None)]
    src = dst * step if align_corners else (dst + 0.5) * step - 0.5
    if mode == "bicubic":
        base = np.floor(src)
        t = src - base
        weights = [
            ((_CUBIC_A * (t + 1) - 5 * _CUBIC_A) * (t + 1) + 8 * _CUBIC_A) * (t + 1) - 4 * _CUBIC_A,
            ((_CUBIC_A + 2) * t - (_CUBIC_A + 3)) * t * t + 1,
            ((_CUBIC_A + 2) * (1 - t) - (_CUBIC_A + 3)) * (1 - t) * (1 - t) + 1,
            ((_CUBIC_A * (2 - t) - 5 * _CUBIC_A) * (2 - t) + 8 * _CUBIC_A) * (2 - t) - 4 * _CUBIC_A,
        ]
        return [
            (np.clip(base + k - 1, 0, size - 1).astype(np.int64), w) for k, w in enumerate(weights)
        ]
    src = np.maximum(src, 0.0)  # linear modes clamp below (PyTorch)
    low = np.minimum(np.floor(src), size - 1).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    t = src - low
    return [(low, 1.0 - t), (high, t)]


def _plan(shape: Sequence[int], attrs: Attrs) -> list[tuple[int, list[Any]]]:
    """Per spatial axis that changes: (axis, its taps)."""
    size = tuple(attrs["size"])
    scales = attrs["scales"] or (None,) * len(size)
    plans = []
    for k, (n, m, s) in enumerate(zip(shape[2:], size, scales, strict=True)):
        mode = attrs["mode"]
        if n == m and s is None and mode != "bicubic":
            continue  # the identity along this axis
        plans.append((2 + k, taps(mode, n, m, bool(attrs["align_corners"]), s)))
    return plans


def _infer_interpolate(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    mode = attrs["mode"]
    if mode not in MODES:
        raise ArgumentError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    size = tuple(int(d) for d in attrs["size"])
    spatial = len(x.shape) - 2
    if spatial < 1 or len(size) != spatial:
        raise ShapeError(
            f"interpolate needs (N, C, *spatial) and one output size per spatial axis;"
            f" got input {x} and size {list(size)}"
        )
    if MODES[mode] not in (None, spatial):
        raise ShapeError(f"mode {mode!r} resizes {MODES[mode]}-D inputs, got {spatial} axes")
    if any(d <= 0 for d in size):
        raise ShapeError(f"output sizes must be positive, got {list(size)}")
    if attrs["align_corners"] is not None and mode.startswith("nearest"):
        raise ArgumentError("align_corners applies to the linear and cubic modes only")
    return TensorType((*x.shape[:2], *size), x.dtype)


def _interpolate(x: np.ndarray, **attrs: Any) -> np.ndarray:
    out = x
    for axis, pairs in _plan(x.shape, attrs):
        shape = [1] * x.ndim
        total: np.ndarray | None = None
        for index, weight in pairs:
            part = np.take(out, index, axis=axis)
            if weight is not None:
                shape[axis] = len(index)
                part = part * weight.reshape(shape)
            total = part if total is None else total + part
        assert total is not None
        out = total
    return np.asarray(out, dtype=x.dtype)


def _expand_interpolate(x: Tensor, **attrs: Any) -> Tensor:
    g = x.graph
    out = x
    for axis, pairs in _plan(x.shape, attrs):
        refuse_free_axes(x, (axis,))  # tables for its declared size: built again per size
        shape = [1] * x.ndim
        total: Tensor | None = None
        for index, weight in pairs:
            part = out.gather(g.constant(index, "int64"), axis=axis)
            if weight is not None:
                shape[axis] = len(index)
                part = part * g.constant(weight.reshape(shape), x.dtype)
            total = part if total is None else total + part
        assert total is not None
        out = total
    return out


def _cases(rng: np.random.Generator) -> list[OpCase]:
    def case(shape: tuple[int, ...], label: str, **attrs: Any) -> OpCase:
        return OpCase((randn(rng, *shape),), attrs, label=label)

    return [
        case((2, 3, 4, 5), "nearest up", mode="nearest", size=(8, 10)),
        case((1, 2, 7, 6), "nearest down", mode="nearest", size=(3, 4)),
        case((1, 2, 5, 5), "nearest-exact", mode="nearest-exact", size=(7, 3)),
        case((2, 2, 4, 3), "bilinear", mode="bilinear", size=(7, 5)),
        case((1, 2, 4, 3), "bilinear corners", mode="bilinear", size=(7, 6), align_corners=True),
        case((1, 1, 6, 7), "bilinear down", mode="bilinear", size=(3, 4)),
        case((1, 2, 4, 5), "bicubic", mode="bicubic", size=(6, 9)),
        case((1, 1, 4, 4), "bicubic corners", mode="bicubic", size=(7, 7), align_corners=True),
        case((2, 3, 5), "linear", mode="linear", size=(8,)),
        case((1, 2, 5), "linear by scale", mode="linear", size=(7,), scales=(1.5,)),
        case((1, 1, 3, 2, 4), "trilinear", mode="trilinear", size=(5, 3, 6)),
        case((1, 2, 3), "nearest 1-D", mode="nearest", size=(7,)),
    ]


register_op(
    OpDef(
        name="interpolate",
        family="pool",
        infer=_infer_interpolate,
        kernel=accumulating(_interpolate),
        expand=_expand_interpolate,
        arity=1,
        cases=_cases,
        tolerance=(1e-5, 1e-6),
        doc="resize the spatial axes (nearest, linear, bilinear, bicubic, trilinear)",
        attrs=(
            Attr(name="mode", kind=str, doc="nearest, nearest-exact, (bi/tri)linear, bicubic"),
            Attr(name="size", kind=tuple, doc="the output's spatial sizes"),
            Attr(
                name="align_corners",
                kind=bool,
                default=None,
                optional=True,
                doc="corner pixels' centres align (None: not given; False for the linear modes)",
            ),
            Attr(
                name="scales",
                kind=tuple,
                default=None,
                optional=True,
                doc="the scale factors that set the coordinates (None: from the sizes)",
            ),
        ),
    )
)


def output_size(
    shape: Sequence[int], size: int | Sequence[int] | None, scale: float | Sequence[float] | None
) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """The output sizes (and the scales that set the coordinates) of ``F.interpolate``."""
    spatial = len(shape) - 2
    if (size is None) == (scale is None):
        raise ArgumentError("give exactly one of size and scale_factor")
    if size is not None:
        sizes = (size,) * spatial if isinstance(size, int) else tuple(size)
        return tuple(int(d) for d in sizes), None
    assert scale is not None
    scales = (float(scale),) * spatial if isinstance(scale, int | float) else tuple(scale)
    if len(scales) != spatial:
        raise ShapeError(f"scale_factor needs {spatial} values, got {list(scales)}")
    return tuple(math.floor(n * s) for n, s in zip(shape[2:], scales, strict=True)), tuple(
        float(s) for s in scales
    )
