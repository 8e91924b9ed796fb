"""Group, instance and RMS normalisation layers, and the distance modules, in
PyTorch's names: the layers hold the parameters, the functions in
:mod:`asgrad.tensor.api.nn_norms` do the work."""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.nn import init
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_norms import (
    cosine_similarity,
    group_norm,
    instance_norm,
    pairwise_distance,
    rms_norm,
)
from asgrad.tensor.errors import ArgumentError, ShapeError

__all__ = [
    "CosineSimilarity",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "PairwiseDistance",
    "RMSNorm",
]


class GroupNorm(Module):
    """Normalises groups of channels of each sample (Wu and He, 2018), as PyTorch's
    ``nn.GroupNorm``; ``weight`` starts at ones and ``bias`` at zeros.

    >>> from asgrad.tensor import Graph
    >>> GroupNorm(2, 6)(Graph().input("x", (4, 6, 5, 5))).shape
    (4, 6, 5, 5)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ArgumentError(
                f"GroupNorm: num_groups {num_groups} must divide num_channels {num_channels}"
            )
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, float(eps)
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if affine:
            self.weight = Parameter((num_channels,), init.ones, dtype=dtype)
            self.bias = Parameter((num_channels,), init.zeros, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm({self.num_groups}, {self.num_channels}) got input of shape"
                f" {list(x.shape)}; axis 1 (channels) must be {self.num_channels}"
            )
        g = x.graph
        weight = None if self.weight is None else g.bind(self.weight)
        bias = None if self.bias is None else g.bind(self.bias)
        return group_norm(x, self.num_groups, weight, bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps},"
            f" affine={self.weight is not None}"
        )


class _InstanceNorm(Module):
    _rank = 0

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        *,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        if track_running_stats:
            raise ArgumentError(
                f"{type(self).__name__}: track_running_stats=True is not supported; instance"
                " norm here always uses each input's own statistics (PyTorch's default)"
            )
        self.num_features, self.eps, self.momentum = num_features, float(eps), momentum
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if affine:
            self.weight = Parameter((num_features,), init.ones, dtype=dtype)
            self.bias = Parameter((num_features,), init.zeros, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim != self._rank or x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}) expects (N, {self.num_features}, ...) of rank"
                f" {self._rank}, got shape {list(x.shape)}"
            )
        g = x.graph
        weight = None if self.weight is None else g.bind(self.weight)
        bias = None if self.bias is None else g.bind(self.bias)
        return instance_norm(x, weight=weight, bias=bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.weight is not None}"


class InstanceNorm1d(_InstanceNorm):
    """Normalises each channel of each sample over its length: (N, C, L)."""

    _rank = 3


class InstanceNorm2d(_InstanceNorm):
    """Normalises each channel of each sample over its height and width: (N, C, H, W)."""

    _rank = 4


class InstanceNorm3d(_InstanceNorm):
    """Normalises each channel of each sample over its volume: (N, C, D, H, W)."""

    _rank = 5


class RMSNorm(Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape``
    axes (Zhang and Sennrich, 2019), as PyTorch's ``nn.RMSNorm``; ``eps`` None is the
    dtype's machine epsilon.

    >>> from asgrad.tensor import Graph
    >>> RMSNorm(8)(Graph().input("x", (2, 5, 8))).shape
    (2, 5, 8)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        *,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps = eps
        self.weight: Parameter | None = None
        if elementwise_affine:
            self.weight = Parameter(self.normalized_shape, init.ones, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        weight = None if self.weight is None else x.graph.bind(self.weight)
        return rms_norm(x, self.normalized_shape, weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class CosineSimilarity(Module):
    """The cosine similarity of two inputs along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` along the last axis."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
