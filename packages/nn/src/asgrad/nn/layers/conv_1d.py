"""1-D convolution and pooling layers, as PyTorch's (``nn.Conv1d``...)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._window_pools import AdaptiveAvgPoolNd, AvgPoolNd, MaxPoolNd
from asgrad.nn.layers.conv import check_padding_mode, padded
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_spatial import (
    adaptive_avg_pool1d,
    avg_pool1d,
    conv1d,
    conv_transpose1d,
    max_pool1d,
)
from asgrad.tensor.errors import ShapeError

__all__ = ["AdaptiveAvgPool1d", "AvgPool1d", "Conv1d", "ConvTranspose1d", "MaxPool1d"]


class _Conv1dBase(Module):
    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int | str = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        *,
        output_padding: int = 0,
        weight_init: Callable[..., np.ndarray] | None = None,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{name}: groups={groups} must divide in_channels ({in_channels}) and"
                f" out_channels ({out_channels})"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.groups, self.output_padding = dilation, groups, output_padding
        if isinstance(padding, str) and padding_mode != "zeros":
            raise ShapeError(f"{name}: padding={padding!r} takes padding_mode='zeros' only")
        self.padding_mode = check_padding_mode(name, padding_mode, self.transposed)
        if self.transposed:
            shape = (in_channels, out_channels // groups, kernel_size)
        else:
            shape = (out_channels, in_channels // groups, kernel_size)
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

        def torch_init(s: tuple[int, ...], d: str = "float32", r: init.RNG = None) -> np.ndarray:
            return init.kaiming_uniform(s, d, r, a=math.sqrt(5.0))  # PyTorch's default

        self.weight = Parameter(shape, weight_init or torch_init, dtype=dtype, rng=rng)
        self.bias: Parameter | None = None
        if bias:
            b_init = init.fan_in_uniform(shape[1] * kernel_size)
            self.bias = Parameter((out_channels,), b_init, dtype=dtype, rng=rng)

    def _operands(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        if x.ndim != 3 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"{type(self).__name__}({self.in_channels}, {self.out_channels}) expects"
                f" (N, {self.in_channels}, L) input, got shape {list(x.shape)}"
            )
        g = x.graph
        return g.bind(self.weight), None if self.bias is None else g.bind(self.bias)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size=({self.kernel_size},),"
            f" stride=({self.stride},), bias={self.bias is not None}"
        )


class Conv1d(_Conv1dBase):
    """1-D convolution of ``(N, C_in, L)``; ``weight`` is ``(out, in / groups, K)``,
    drawn as PyTorch's ``nn.Conv1d`` draws it.

    >>> from asgrad.tensor import Graph
    >>> Conv1d(3, 8, 5, padding=2, rng=0)(Graph().input("x", (2, 3, 20))).shape
    (2, 8, 20)
    """

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        padding = self.padding
        if not isinstance(padding, str):
            x, (padding,) = padded(x, (padding,), self.padding_mode)
        return conv1d(x, w, b, self.stride, padding, self.dilation, self.groups)


class ConvTranspose1d(_Conv1dBase):
    """Transposed 1-D convolution; ``weight`` is ``(in, out / groups, K)``.

    >>> from asgrad.tensor import Graph
    >>> ConvTranspose1d(8, 3, 4, stride=2, padding=1, rng=0)(Graph().input("x", (2, 8, 10))).shape
    (2, 3, 20)
    """

    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        output_padding: int = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int = 1,
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            output_padding=output_padding,
            dtype=dtype,
            rng=rng,
        )

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        assert isinstance(self.padding, int)
        return conv_transpose1d(
            x, w, b, self.stride, self.padding, self.output_padding, self.groups, self.dilation
        )


class MaxPool1d(MaxPoolNd):
    """The max of each window along the last axis.

    >>> from asgrad.nn import MaxPool1d
    >>> from asgrad.tensor import Graph
    >>> MaxPool1d(2)(Graph().input("x", (1, 4, 8))).shape
    (1, 4, 4)
    """

    pool = staticmethod(max_pool1d)


class AvgPool1d(AvgPoolNd):
    """The mean of each window along the last axis.

    >>> from asgrad.nn import AvgPool1d
    >>> from asgrad.tensor import Graph
    >>> AvgPool1d(2)(Graph().input("x", (1, 4, 8))).shape
    (1, 4, 4)
    """

    pool = staticmethod(avg_pool1d)


class AdaptiveAvgPool1d(AdaptiveAvgPoolNd):
    """Average pooling to ``output_size``.

    >>> from asgrad.nn import AdaptiveAvgPool1d
    >>> from asgrad.tensor import Graph
    >>> AdaptiveAvgPool1d(2)(Graph().input("x", (1, 4, 8))).shape
    (1, 4, 2)
    """

    pool = staticmethod(adaptive_avg_pool1d)
