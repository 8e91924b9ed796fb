"""Pooling layers over ``(N, C, H, W)``: max, average, adaptive and global average.

The layers check the input; the ops come from `asgrad.tensor.api.nn_functional`.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.nn.layers.conv import IntPair, as_pair
from asgrad.nn.module import Module
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_functional import adaptive_avg_pool2d
from asgrad.tensor.api.nn_spatial import avg_pool2d, max_pool2d, max_unpool2d
from asgrad.tensor.errors import ShapeError


def _check_nchw(name: str, x: Tensor) -> None:
    if x.ndim != 4:
        hint = " (add a batch axis with x.expand_dims(0))" if x.ndim == 3 else ""
        raise ShapeError(f"{name} expects (N, C, H, W) input, got shape {list(x.shape)}{hint}")


class _Pool2d(Module):
    """Shared arguments and checks of ``MaxPool2d`` and ``AvgPool2d``."""

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = as_pair(kernel_size, "kernel_size", 1)
        self.stride = self.kernel_size if stride is None else as_pair(stride, "stride", 1)
        self.padding = as_pair(padding, "padding")
        self.ceil_mode = bool(ceil_mode)
        if any(p > k // 2 for p, k in zip(self.padding, self.kernel_size, strict=True)):
            raise ShapeError(
                f"{type(self).__name__}: padding {self.padding} must be at most half the"
                f" kernel size {self.kernel_size}"
            )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    """The maximum of each ``kernel_size`` window (stride defaults to the kernel size).

    Padding counts as -inf, as in PyTorch; ``dilation`` and ``ceil_mode`` as PyTorch's.
    ``return_indices=True`` makes the layer return ``(values, indices)``.

    >>> from asgrad.tensor import Graph
    >>> MaxPool2d(2)(Graph().input("x", (1, 3, 8, 8))).shape
    (1, 3, 4, 4)
    """

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation = as_pair(dilation, "dilation", 1)
        self.return_indices = return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        _check_nchw(type(self).__name__, x)
        return max_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class AvgPool2d(_Pool2d):
    """The mean of each ``kernel_size`` window; ``count_include_pad`` as in PyTorch.

    >>> from asgrad.tensor import Graph
    >>> AvgPool2d(3, stride=2, padding=1)(Graph().input("x", (1, 3, 8, 8))).shape
    (1, 3, 4, 4)
    """

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        _check_nchw(type(self).__name__, x)
        return avg_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return super().extra_repr() + f", count_include_pad={self.count_include_pad}"


class AdaptiveAvgPool2d(Module):
    """Averages into a fixed ``output_size`` grid whatever the input size (PyTorch's bins).

    >>> from asgrad.tensor import Graph
    >>> AdaptiveAvgPool2d((2, 3))(Graph().input("x", (1, 4, 9, 10))).shape
    (1, 4, 2, 3)
    """

    def __init__(self, output_size: IntPair) -> None:
        super().__init__()
        self.output_size = as_pair(output_size, "output_size", 1)

    def forward(self, x: Tensor) -> Tensor:
        _check_nchw("AdaptiveAvgPool2d", x)
        return adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class GlobalAvgPool2d(Module):
    """The mean over height and width: ``(N, C, H, W) -> (N, C)`` (``keepdims`` keeps 1x1).

    >>> from asgrad.tensor import Graph
    >>> GlobalAvgPool2d()(Graph().input("x", (2, 4, 5, 5))).shape
    (2, 4)
    """

    def __init__(self, keepdims: bool = False) -> None:
        super().__init__()
        self.keepdims = keepdims

    def forward(self, x: Tensor) -> Tensor:
        _check_nchw("GlobalAvgPool2d", x)
        return x.mean(axis=(2, 3), keepdims=self.keepdims)

    def extra_repr(self) -> str:
        return f"keepdims={self.keepdims}" if self.keepdims else ""


class MaxUnpool2d(Module):
    """The inverse of ``MaxPool2d(..., return_indices=True)``: each value written back
    at its index, zeros elsewhere (PyTorch's ``nn.MaxUnpool2d``).

    >>> from asgrad.nn import MaxPool2d, MaxUnpool2d
    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (1, 4, 8, 8))
    >>> pooled, indices = MaxPool2d(2, return_indices=True)(x)
    >>> MaxUnpool2d(2)(pooled, indices).shape
    (1, 4, 8, 8)
    """

    def __init__(
        self, kernel_size: IntPair, stride: IntPair | None = None, padding: IntPair = 0
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(
        self, x: Tensor, indices: Tensor, output_size: Sequence[int] | None = None
    ) -> Tensor:
        return max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding, output_size)
