"""The pooling modules of every rank share these: each subclass names its function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from asgrad.nn.module import Module
from asgrad.tensor import Tensor

Size = int | Sequence[int]


class MaxPoolNd(Module):
    """The max of each window (``pool`` is the functional form, e.g. ``max_pool1d``)."""

    pool: ClassVar[Callable[..., Tensor]]

    def __init__(self, kernel_size: Size, stride: Size | None = None, padding: Size = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return type(self).pool(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPoolNd(MaxPoolNd):
    """The mean of each window; zero padding counts unless ``count_include_pad=False``."""

    def __init__(
        self,
        kernel_size: Size,
        stride: Size | None = None,
        padding: Size = 0,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding)
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        pool = type(self).pool
        return pool(x, self.kernel_size, self.stride, self.padding, self.count_include_pad)


class AdaptiveAvgPoolNd(Module):
    """Average pooling to ``output_size``."""

    pool: ClassVar[Callable[..., Tensor]]

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return type(self).pool(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
