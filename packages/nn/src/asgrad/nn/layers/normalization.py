"""Normalisation layers, in PyTorch's names: ``LayerNorm``, ``BatchNorm1d`` /
``BatchNorm2d``, ``GroupNorm``, ``InstanceNorm1d`` / ``2d`` / ``3d`` and ``RMSNorm``.

The layers hold the parameters and running statistics; the normalisation comes from
`asgrad.tensor.api.nn_functional` (layer and batch norm) and
[`asgrad.tensor.api.nn_norms`][asgrad.tensor.api.nn_norms] (the others).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.nn import init
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Graph, Tensor, Variable, where
from asgrad.tensor.api.functional import size_ratio
from asgrad.tensor.api.nn_functional import batch_norm, batch_normalize, layer_norm
from asgrad.tensor.api.nn_norms import group_norm, instance_norm, rms_norm
from asgrad.tensor.errors import ArgumentError, ShapeError


class LayerNorm(Module):
    """Normalises over the last ``len(normalized_shape)`` axes (Ba et al., 2016).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance,
    as PyTorch's ``nn.LayerNorm``; ``weight`` starts at ones and ``bias`` at zeros.
    The same in training and evaluation.

    >>> from asgrad.tensor import Graph
    >>> ln = LayerNorm(8)
    >>> ln(Graph().input("x", (2, 5, 8))).shape
    (2, 5, 8)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps = float(eps)
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if elementwise_affine:
            self.weight = Parameter(self.normalized_shape, init.ones, dtype=dtype)
            if bias:
                self.bias = Parameter(self.normalized_shape, init.zeros, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k :]) != self.normalized_shape:
            raise ShapeError(
                f"LayerNorm({list(self.normalized_shape)}) got input of shape"
                f" {list(x.shape)}; its last {k} axes must be {list(self.normalized_shape)}"
            )
        g = x.graph
        weight = None if self.weight is None else g.bind(self.weight)
        bias = None if self.bias is None else g.bind(self.bias)  # None: zeros
        return layer_norm(x, weight, bias, self.eps, normalized_shape=self.normalized_shape)

    def extra_repr(self) -> str:
        shape = (
            self.normalized_shape[0] if len(self.normalized_shape) == 1 else self.normalized_shape
        )
        return f"{shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class _BatchNorm(Module):
    """Shared code of ``BatchNorm1d`` and ``BatchNorm2d``."""

    _ranks: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        self.num_features = int(num_features)
        self.eps = float(eps)
        self.momentum = momentum
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if affine:
            self.weight = Parameter((num_features,), init.ones, dtype=dtype)
            self.bias = Parameter((num_features,), init.zeros, dtype=dtype)
        self.running_mean: Variable | None = None
        self.running_var: Variable | None = None
        self.num_batches_tracked: Variable | None = None
        if track_running_stats:
            self.running_mean = Variable(
                "running_mean", np.zeros(num_features, dtype), trainable=False
            )
            self.running_var = Variable(
                "running_var", np.ones(num_features, dtype), trainable=False
            )
            self.num_batches_tracked = Variable(
                "num_batches_tracked", np.zeros((), np.int64), trainable=False
            )

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.running_mean is not None and self.running_var is not None:
            self.running_mean.value = np.zeros_like(self.running_mean.value)
            self.running_var.value = np.ones_like(self.running_var.value)
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.value = np.zeros((), np.int64)

    def _check(self, x: Tensor) -> None:
        name = type(self).__name__
        if x.ndim not in self._ranks:
            ranks = " or ".join(str(r) for r in self._ranks)
            raise ShapeError(
                f"{name}({self.num_features}) expects an input of rank {ranks}, got shape"
                f" {list(x.shape)}"
            )
        if x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}) got input of shape {list(x.shape)}; axis 1"
                f" (channels) must be {self.num_features}"
            )

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        g = x.graph
        weight = None if self.weight is None else g.bind(self.weight)
        bias = None if self.bias is None else g.bind(self.bias)
        if self.running_mean is None or self.running_var is None:
            return batch_normalize(x, weight, bias, self.eps)  # batch statistics always
        running_mean, running_var = g.bind(self.running_mean), g.bind(self.running_var)
        if not self.training:  # traced in evaluation mode: an evaluation graph
            return batch_norm(x, running_mean, running_var, weight, bias, eps=self.eps).y
        # Traced in training mode: the mode is read when the graph runs. The batch is
        # normalised by its own statistics (the fused op), then scaled and shifted per
        # channel; in evaluation mode the scale and shift also turn the batch
        # statistics into the running ones: (x - rm) / sr = x_hat * sb / sr + (mb - rm) / sr.
        active = self.mode_flag(g)
        axes = (0, *range(2, x.ndim))
        shape = (-1,) + (1,) * (x.ndim - 2)  # a (C,) vector against (N, C, ...)
        batch_mean = x.mean(axis=axes)
        centred = x - batch_mean.reshape(shape)
        var = (centred * centred).mean(axis=axes)
        running_std = (running_var + self.eps).sqrt()
        ratio = (var + self.eps).sqrt() / running_std
        offset = (batch_mean - running_mean) / running_std
        one = g.constant(1.0, x.dtype)
        scale = (
            where(active, one, ratio) if weight is None else where(active, weight, weight * ratio)
        )
        if weight is not None:
            offset = offset * weight
        zero = g.constant(0.0, x.dtype)
        shift = where(
            active, zero if bias is None else bias, offset if bias is None else offset + bias
        )
        x_hat = batch_normalize(x, None, None, self.eps)
        self._update_running(batch_mean, var, size_ratio(x, batch_mean), active)
        return x_hat * scale.reshape(shape) + shift.reshape(shape)

    def _update_running(self, mean: Tensor, var: Tensor, count: Tensor, active: Tensor) -> None:
        # PyTorch's semantics: running = (1 - momentum) * running + momentum * batch,
        # with the *unbiased* batch variance (``count`` values a channel, read at run
        # time); momentum None is a cumulative average. Only in training mode: in
        # evaluation mode each keeps its value.
        assert self.running_mean is not None
        assert self.running_var is not None
        assert self.num_batches_tracked is not None
        g = mean.graph
        unbiased = var * (count / (count - 1.0).maximum(1.0))
        # A module called again in one graph (netD(real), then netD(fake)) continues
        # from the statistics the earlier call left, as PyTorch's calls run in order.
        seen = self._latest(g, self.num_batches_tracked)
        tracked = seen + 1
        if self.momentum is None:
            factor = 1.0 / tracked.cast(mean.dtype)
        else:
            factor = g.constant(float(self.momentum), mean.dtype)
        running_mean = self._latest(g, self.running_mean)
        running_var = self._latest(g, self.running_var)
        new_mean = running_mean + (mean - running_mean) * factor
        new_var = running_var + (unbiased - running_var) * factor
        g.updates[self.running_mean] = where(active, new_mean, running_mean)
        g.updates[self.running_var] = where(active, new_var, running_var)
        g.updates[self.num_batches_tracked] = where(active, tracked, seen)

    @staticmethod
    def _latest(g: Graph, var: Variable) -> Tensor:
        """``var``'s value after the updates this graph already asks for."""
        return g.updates[var] if var in g.updates else g.bind(var)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum},"
            f" affine={self.weight is not None},"
            f" track_running_stats={self.running_mean is not None}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs (Ioffe & Szegedy, 2015).

    Training mode normalises with the batch's statistics and updates the running
    mean and (unbiased) variance as PyTorch does,
    ``running = (1 - momentum) * running + momentum * batch``, through
    ``graph.add_update`` (an optimizer's compiled step applies it); evaluation mode
    normalises with the running statistics. ``weight`` starts at ones, ``bias`` at
    zeros.

    >>> from asgrad.tensor import Graph
    >>> bn = BatchNorm1d(4)
    >>> bn(Graph().input("x", (8, 4))).shape
    (8, 4)
    """

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs, per channel (see ``BatchNorm1d``).

    >>> from asgrad.tensor import Graph
    >>> bn = BatchNorm2d(3)
    >>> bn(Graph().input("x", (2, 3, 5, 5))).shape
    (2, 3, 5, 5)
    """

    _ranks = (4,)


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
    """Normalises each channel of each sample over its length: (N, C, L).

    >>> from asgrad.nn import InstanceNorm1d
    >>> from asgrad.tensor import Graph
    >>> InstanceNorm1d(4)(Graph().input("x", (2, 4, 8))).shape
    (2, 4, 8)
    """

    _rank = 3


class InstanceNorm2d(_InstanceNorm):
    """Normalises each channel of each sample over its height and width: (N, C, H, W).

    >>> from asgrad.nn import InstanceNorm2d
    >>> from asgrad.tensor import Graph
    >>> InstanceNorm2d(4)(Graph().input("x", (2, 4, 8, 8))).shape
    (2, 4, 8, 8)
    """

    _rank = 4


class InstanceNorm3d(_InstanceNorm):
    """Normalises each channel of each sample over its volume: (N, C, D, H, W).

    >>> from asgrad.nn import InstanceNorm3d
    >>> from asgrad.tensor import Graph
    >>> InstanceNorm3d(4)(Graph().input("x", (2, 4, 8, 8, 8))).shape
    (2, 4, 8, 8, 8)
    """

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
