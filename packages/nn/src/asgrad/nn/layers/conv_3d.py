"""3-D convolution and pooling layers over (N, C, D, H, W), as PyTorch's."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers.conv import check_padding_mode, padded
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.errors import ShapeError
from asgrad.tensor.nn_spatial import (
    adaptive_avg_pool3d,
    avg_pool3d,
    conv3d,
    conv_transpose3d,
    max_pool3d,
)

__all__ = ["AdaptiveAvgPool3d", "AvgPool3d", "Conv3d", "ConvTranspose3d", "MaxPool3d"]

Triple = int | Sequence[int]


def _triple(value: Triple) -> tuple[int, int, int]:
    items = (value,) * 3 if isinstance(value, int) else tuple(value)
    return int(items[0]), int(items[1]), int(items[2])


class Conv3d(Module):
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
        super().__init__()
        self.padding_mode = check_padding_mode("Conv3d", padding_mode)
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"Conv3d: groups={groups} must divide in_channels ({in_channels}) and"
                f" out_channels ({out_channels})"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _triple(kernel_size)
        self.stride, self.padding, self.dilation = (
            _triple(stride),
            _triple(padding),
            _triple(dilation),
        )
        shape = (out_channels, in_channels // groups, *self.kernel_size)
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

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 5 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"Conv3d({self.in_channels}, {self.out_channels}) expects"
                f" (N, {self.in_channels}, D, H, W) input, got shape {list(x.shape)}"
            )
        g = x.graph
        bias = None if self.bias is None else g.bind(self.bias)
        x, padding = padded(x, self.padding, self.padding_mode)
        return conv3d(
            x, g.bind(self.weight), bias, self.stride, padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size},"
            f" stride={self.stride}, padding={self.padding}, bias={self.bias is not None}"
        )


class ConvTranspose3d(Module):
    """Transposed 3-D convolution; ``weight`` is ``(in, out / groups, kD, kH, kW)``.

    >>> from asgrad.tensor import Graph
    >>> ConvTranspose3d(4, 2, 2, stride=2, rng=0)(Graph().input("x", (1, 4, 3, 3, 3))).shape
    (1, 2, 6, 6, 6)
    """

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
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"ConvTranspose3d: groups={groups} must divide in_channels ({in_channels})"
                f" and out_channels ({out_channels})"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _triple(kernel_size), _triple(stride)
        self.padding, self.output_padding = _triple(padding), _triple(output_padding)
        self.dilation = _triple(dilation)
        shape = (in_channels, out_channels // groups, *self.kernel_size)
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

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 5 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"ConvTranspose3d({self.in_channels}, {self.out_channels}) expects"
                f" (N, {self.in_channels}, D, H, W) input, got shape {list(x.shape)}"
            )
        g = x.graph
        bias = None if self.bias is None else g.bind(self.bias)
        return conv_transpose3d(
            x,
            g.bind(self.weight),
            bias,
            self.stride,
            self.padding,
            self.output_padding,
            self.groups,
            self.dilation,
        )


class MaxPool3d(Module):
    """The maximum of each 3-D window."""

    def __init__(
        self, kernel_size: Triple, stride: Triple | None = None, padding: Triple = 0
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return max_pool3d(x, self.kernel_size, self.stride, self.padding)


class AvgPool3d(Module):
    """The mean of each 3-D window."""

    def __init__(
        self,
        kernel_size: Triple,
        stride: Triple | None = None,
        padding: Triple = 0,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.count_include_pad)


class AdaptiveAvgPool3d(Module):
    """Average pooling to ``output_size``."""

    def __init__(self, output_size: Triple) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool3d(x, self.output_size)
