"""Resampling layers, as PyTorch's: ``Upsample`` and the pixel shuffles."""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.nn.module import Module
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_spatial import interpolate, pixel_shuffle, pixel_unshuffle

__all__ = [
    "PixelShuffle",
    "PixelUnshuffle",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]


class Upsample(Module):
    """Resize the spatial axes to ``size`` or by ``scale_factor`` (see ``F.interpolate``).

    >>> from asgrad.tensor import Graph
    >>> Upsample(scale_factor=2, mode="bilinear")(Graph().input("x", (1, 3, 4, 5))).shape
    (1, 3, 8, 10)
    """

    def __init__(
        self,
        size: int | Sequence[int] | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolate(
            x,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with mode nearest.

    >>> from asgrad.nn import UpsamplingNearest2d
    >>> from asgrad.tensor import Graph
    >>> UpsamplingNearest2d(size=(10, 12))(Graph().input("x", (1, 4, 8, 8))).shape
    (1, 4, 10, 12)
    """

    def __init__(
        self, size: int | Sequence[int] | None = None, scale_factor: float | None = None
    ) -> None:
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with mode bilinear and ``align_corners=True`` (PyTorch's).

    >>> from asgrad.nn import UpsamplingBilinear2d
    >>> from asgrad.tensor import Graph
    >>> UpsamplingBilinear2d(scale_factor=2)(Graph().input("x", (1, 4, 8, 8))).shape
    (1, 4, 16, 16)
    """

    def __init__(
        self, size: int | Sequence[int] | None = None, scale_factor: float | None = None
    ) -> None:
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class PixelShuffle(Module):
    """(N, C r^2, H, W) to (N, C, H r, W r).

    >>> from asgrad.nn import PixelShuffle
    >>> from asgrad.tensor import Graph
    >>> PixelShuffle(2)(Graph().input("x", (1, 4, 8, 8))).shape
    (1, 1, 16, 16)
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Module):
    """(N, C, H r, W r) to (N, C r^2, H, W).

    >>> from asgrad.nn import PixelUnshuffle
    >>> from asgrad.tensor import Graph
    >>> PixelUnshuffle(2)(Graph().input("x", (1, 4, 8, 8))).shape
    (1, 16, 4, 4)
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return pixel_unshuffle(x, self.downscale_factor)
