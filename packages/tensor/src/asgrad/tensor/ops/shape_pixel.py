"""``pixel_shuffle`` and ``pixel_unshuffle``: a reshape, a transpose and a reshape.

``pixel_shuffle(x, r)`` moves (N, C r^2, H, W) to (N, C, H r, W r) (sub-pixel
convolution, Shi et al. 2016); ``pixel_unshuffle`` is its inverse. Both expand into
the shape ops (``OpDef.expand``), so their gradients and GPU kernels are those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, register_op

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _factor(attrs: Attrs, key: str) -> int:
    r = int(attrs[key])
    if r <= 0:
        raise ShapeError(f"{key} must be positive, got {r}")
    return r


def _infer_shuffle(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, r = types[0], _factor(attrs, "upscale_factor")
    if len(x.shape) != 4 or x.shape[1] % (r * r):
        raise ShapeError(
            f"pixel_shuffle needs (N, C * {r}**2, H, W) with channels divisible by {r * r}, got {x}"
        )
    n, c, h, w = x.shape
    return TensorType((n, c // (r * r), h * r, w * r), x.dtype)


def _infer_unshuffle(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, r = types[0], _factor(attrs, "downscale_factor")
    if len(x.shape) != 4 or x.shape[2] % r or x.shape[3] % r:
        raise ShapeError(
            f"pixel_unshuffle needs (N, C, H, W) with H and W divisible by {r}, got {x}"
        )
    n, c, h, w = x.shape
    return TensorType((n, c * r * r, h // r, w // r), x.dtype)


def _shuffle(x: np.ndarray, upscale_factor: int) -> np.ndarray:
    n, c, h, w = x.shape
    r = upscale_factor
    y = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (r * r), h * r, w * r))


def _unshuffle(x: np.ndarray, downscale_factor: int) -> np.ndarray:
    n, c, h, w = x.shape
    r = downscale_factor
    y = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * r * r, h // r, w // r))


def _expand_shuffle(x: Tensor, upscale_factor: int) -> Tensor:
    _, c, h, w = x.shape
    r = upscale_factor
    y = x.reshape(-1, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(-1, c // (r * r), h * r, w * r)


def _expand_unshuffle(x: Tensor, downscale_factor: int) -> Tensor:
    _, c, h, w = x.shape
    r = downscale_factor
    y = x.reshape(-1, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(-1, c * r * r, h // r, w // r)


def _shuffle_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 8, 3, 2),), {"upscale_factor": 2}, label="r=2"),
        OpCase((randn(rng, 1, 9, 2, 2),), {"upscale_factor": 3}, label="r=3"),
    ]


def _unshuffle_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 2, 6, 4),), {"downscale_factor": 2}, label="r=2"),
        OpCase((randn(rng, 1, 1, 3, 6),), {"downscale_factor": 3}, label="r=3"),
    ]


register_op(
    OpDef(
        name="pixel_shuffle",
        family="shape",
        infer=_infer_shuffle,
        kernel=_shuffle,
        expand=_expand_shuffle,
        arity=1,
        cases=_shuffle_cases,
        doc="(N, C r^2, H, W) to (N, C, H r, W r)",
    )
)
register_op(
    OpDef(
        name="pixel_unshuffle",
        family="shape",
        infer=_infer_unshuffle,
        kernel=_unshuffle,
        expand=_expand_unshuffle,
        arity=1,
        cases=_unshuffle_cases,
        doc="(N, C, H r, W r) to (N, C r^2, H, W)",
    )
)
