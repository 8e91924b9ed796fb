"""Convolution layers: ``Conv2d`` and ``ConvTranspose2d`` (NCHW, as PyTorch).

The layers hold the parameters and check the input; the ops and their attributes
come from `asgrad.tensor.api.nn_functional`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import IntPair, as_pair, positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.functional_shape import pad
from asgrad.tensor.api.nn_functional import conv2d, conv_transpose2d
from asgrad.tensor.errors import ShapeError

__all__ = ["Conv2d", "ConvTranspose2d", "IntPair", "as_pair"]


def _torch_conv_weight(
    shape: tuple[int, ...], dtype: str = "float32", rng: init.RNG = None
) -> np.ndarray:
    # PyTorch's ``_ConvNd.reset_parameters``: Kaiming-uniform with a = sqrt(5), i.e.
    # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = shape[1] * kH * kW.
    return init.kaiming_uniform(shape, dtype, rng, a=math.sqrt(5.0))


class _ConvNd(Module):
    """Shared parameters and checks of the 2-D convolutions."""

    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        *,
        weight_init: Callable[..., np.ndarray] | None = None,
        bias_init: Callable[..., np.ndarray] | None = None,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        in_channels = positive_int(in_channels, name, "in_channels")
        out_channels = positive_int(out_channels, name, "out_channels")
        groups = positive_int(groups, name, "groups")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{name}: groups={groups} must divide in_channels ({in_channels}) and"
                f" out_channels ({out_channels})"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = as_pair(kernel_size, "kernel_size", 1)
        self.stride = as_pair(stride, "stride", 1)
        self.padding = as_pair(padding, "padding")
        self.dilation = as_pair(dilation, "dilation", 1)
        self.groups = groups
        self.padding_mode = check_padding_mode(name, padding_mode, self.transposed)
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(shape, weight_init or _torch_conv_weight, dtype=dtype, rng=rng)
        self.bias: Parameter | None = None
        if bias:
            fan_in = shape[1] * self.kernel_size[0] * self.kernel_size[1]
            b_init = bias_init or init.fan_in_uniform(fan_in)
            self.bias = Parameter((out_channels,), b_init, dtype=dtype, rng=rng)

    def _check(self, x: Tensor) -> None:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            hint = " (add a batch axis with x.expand_dims(0))" if x.ndim == 3 else ""
            raise ShapeError(
                f"{type(self).__name__}({self.in_channels}, {self.out_channels}) expects"
                f" (N, {self.in_channels}, H, W) input, got shape {list(x.shape)}{hint}"
            )

    def _operands(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """The weight and bias in ``x``'s graph, once ``x`` is checked."""
        self._check(x)
        g = x.graph
        return g.bind(self.weight), None if self.bias is None else g.bind(self.bias)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
        if self.stride != (1, 1):
            s += f", stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + f", bias={self.bias is not None}"


class Conv2d(_ConvNd):
    """2-D convolution of ``(N, C_in, H, W)`` into ``(N, C_out, H', W')``, as PyTorch's.

    ``weight`` is ``(out_channels, in_channels / groups, kH, kW)``; weight and bias
    are drawn as PyTorch's ``nn.Conv2d`` draws them (U(-1/sqrt(fan_in),
    1/sqrt(fan_in)), ``fan_in = in_channels / groups * kH * kW``).

    >>> from asgrad.tensor import Graph
    >>> conv = Conv2d(3, 8, 3, padding=1, rng=0)
    >>> conv(Graph().input("x", (2, 3, 16, 16))).shape
    (2, 8, 16, 16)
    """

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        x, padding = padded(x, self.padding, self.padding_mode)
        return conv2d(
            x,
            w,
            b,
            stride=self.stride,
            padding=padding,
            dilation=self.dilation,
            groups=self.groups,
        )


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution (the adjoint of ``Conv2d``), as PyTorch's.

    ``weight`` is ``(in_channels, out_channels / groups, kH, kW)``; the output size
    is ``(H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1``.

    >>> from asgrad.tensor import Graph
    >>> up = ConvTranspose2d(8, 3, 4, stride=2, padding=1, rng=0)
    >>> up(Graph().input("x", (2, 8, 7, 7))).shape
    (2, 3, 14, 14)
    """

    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        output_padding: IntPair = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntPair = 1,
        padding_mode: str = "zeros",
        *,
        weight_init: Callable[..., np.ndarray] | None = None,
        bias_init: Callable[..., np.ndarray] | None = None,
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
            padding_mode,
            weight_init=weight_init,
            bias_init=bias_init,
            dtype=dtype,
            rng=rng,
        )
        self.output_padding = as_pair(output_padding, "output_padding")

    def forward(self, x: Tensor) -> Tensor:
        w, b = self._operands(x)
        return conv_transpose2d(
            x,
            w,
            b,
            stride=self.stride,
            padding=self.padding,
            output_padding=self.output_padding,
            groups=self.groups,
            dilation=self.dilation,
        )

    def extra_repr(self) -> str:
        extra = f", output_padding={self.output_padding}" if self.output_padding != (0, 0) else ""
        return super().extra_repr() + extra


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def check_padding_mode(layer: str, mode: str, transposed: bool = False) -> str:
    """``mode`` if it is one of PyTorch's ``padding_mode`` values this layer takes."""
    allowed = ("zeros",) if transposed else PADDING_MODES
    if mode not in allowed:
        raise ShapeError(f"{layer}: padding_mode must be one of {allowed}, got {mode!r}")
    return mode


def padded(x: Tensor, padding: Sequence[int], mode: str) -> tuple[Tensor, tuple[int, ...]]:
    """``x`` padded by ``mode`` (then the convolution pads nothing), or ``x`` as it is
    and the padding for the convolution's zeros."""
    if mode == "zeros" or not any(padding):
        return x, tuple(padding)
    widths: list[int] = []
    for p in reversed(padding):  # F.pad's order: the last axis first
        widths += [p, p]
    return pad(x, tuple(widths), mode=mode), (0,) * len(padding)
