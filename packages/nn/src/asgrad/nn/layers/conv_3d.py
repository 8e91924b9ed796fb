"""3-D convolution and pooling layers over (N, C, D, H, W), as PyTorch's."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._window_pools import AdaptiveAvgPoolNd, AvgPoolNd, MaxPoolNd
from asgrad.nn.layers.conv import check_padding_mode, padded
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_spatial import (
    adaptive_avg_pool3d,
    avg_pool3d,
    conv3d,
    conv_transpose3d,
    max_pool3d,
)
from asgrad.tensor.errors import ShapeError

__all__ = ["AdaptiveAvgPool3d", "AvgPool3d", "Conv3d", "ConvTranspose3d", "MaxPool3d"]

Triple = int | Sequence[int]


def _triple(value: Triple) -> tuple[int, int, int]:
    items = (value,) * 3 if isinstance(value, int) else tuple(value)
    return int(items[0]), int(items[1]), int(items[2])


class _Conv3dBase(Module):
    """Shared parameters and checks of ``Conv3d`` and ``ConvTranspose3d``."""

    transposed = False

    def __init__(
        self,
        channels: tuple[int, int],
        kernel_size: Triple,
        window: tuple[Triple, Triple, Triple],
        groups: int,
        bias: bool,
        padding_mode: str,
        dtype: str,
        rng: init.RNG,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        in_channels, out_channels = channels
        self.padding_mode = check_padding_mode(name, padding_mode, self.transposed)
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{name}: groups={groups} must divide in_channels ({in_channels}) and"
                f" out_channels ({out_channels})"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _triple(kernel_size)
        self.stride, self.padding, self.dilation = (_triple(v) for v in window)
        first, second = (in_channels, out_channels) if self.transposed else channels[::-1]
        shape = (first, second // groups, *self.kernel_size)
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.weight = Parameter(
            init.kaiming_uniform(shape, dtype, rng, a=math.sqrt(5.0)), dtype=dtype
        )
        self.bias: Parameter | None = None
        if bias:
            fan_in = shape[1] * math.prod(self.kernel_size)
            self.bias = Parameter(
                (out_channels,), init.fan_in_uniform(fan_in), dtype=dtype, rng=rng
            )

    def _operands(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        if x.ndim != 5 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"{type(self).__name__}({self.in_channels}, {self.out_channels}) expects"
                f" (N, {self.in_channels}, D, H, W) input, got shape {list(x.shape)}"
            )
        g = x.graph
        return g.bind(self.weight), None if self.bias is None else g.bind(self.bias)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size},"
            f" stride={self.stride}, padding={self.padding}, bias={self.bias is not None}"
        )


class Conv3d(_Conv3dBase):
    """3-D convolution; ``weight`` is ``(out, in / groups, kD, kH, kW)``, drawn as
    PyTorch's ``nn.Conv3d`` draws it.

    >>> from asgrad.tensor import Graph
    >>> Conv3d(2, 4, 3, padding=1, rng=0)(Graph().input("x", (1, 2, 5, 6, 6))).shape
    (1, 4, 5, 6, 6)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Triple,
        stride: Triple = 1,
        padding: Triple = 0,
        dilation: Triple = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        window = (stride, padding, dilation)
        channels = (in_channels, out_channels)
        super().__init__(channels, kernel_size, window, groups, bias, padding_mode, dtype, rng)

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        x, padding = padded(x, self.padding, self.padding_mode)
        return conv3d(x, w, b, self.stride, padding, self.dilation, self.groups)


class ConvTranspose3d(_Conv3dBase):
    """Transposed 3-D convolution; ``weight`` is ``(in, out / groups, kD, kH, kW)``.

    >>> from asgrad.tensor import Graph
    >>> ConvTranspose3d(4, 2, 2, stride=2, rng=0)(Graph().input("x", (1, 4, 3, 3, 3))).shape
    (1, 2, 6, 6, 6)
    """

    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Triple,
        stride: Triple = 1,
        padding: Triple = 0,
        output_padding: Triple = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Triple = 1,
        padding_mode: str = "zeros",
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        window = (stride, padding, dilation)
        channels = (in_channels, out_channels)
        super().__init__(channels, kernel_size, window, groups, bias, padding_mode, dtype, rng)
        self.output_padding = _triple(output_padding)

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        return conv_transpose3d(
            x, w, b, self.stride, self.padding, self.output_padding, self.groups, self.dilation
        )


class MaxPool3d(MaxPoolNd):
    """The max of each window of (N, C, D, H, W).

    >>> from asgrad.nn import MaxPool3d
    >>> from asgrad.tensor import Graph
    >>> MaxPool3d(2)(Graph().input("x", (1, 4, 8, 8, 8))).shape
    (1, 4, 4, 4, 4)
    """

    pool = staticmethod(max_pool3d)


class AvgPool3d(AvgPoolNd):
    """The mean of each window of (N, C, D, H, W).

    >>> from asgrad.nn import AvgPool3d
    >>> from asgrad.tensor import Graph
    >>> AvgPool3d(2)(Graph().input("x", (1, 4, 8, 8, 8))).shape
    (1, 4, 4, 4, 4)
    """

    pool = staticmethod(avg_pool3d)


class AdaptiveAvgPool3d(AdaptiveAvgPoolNd):
    """Average pooling to ``output_size``.

    >>> from asgrad.nn import AdaptiveAvgPool3d
    >>> from asgrad.tensor import Graph
    >>> AdaptiveAvgPool3d((2, 2, 2))(Graph().input("x", (1, 4, 8, 8, 8))).shape
    (1, 4, 2, 2, 2)
    """

    pool = staticmethod(adaptive_avg_pool3d)
