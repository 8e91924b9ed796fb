"""The GPU twins of the neural-network ops: convolution, pooling, norms, dropout.

Importing this module registers their lowerings into
:data:`asgrad.gpu.lowering.LOWERINGS` (``asgrad.gpu`` imports it). Attributes are
read with the same helpers as the numpy kernels, so both backends agree on defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgrad.gpu.array import GpuArray
from asgrad.gpu.lowering import LOWERINGS, Lowering
from asgrad.gpu.ops import conv, norm, pool
from asgrad.gpu.ops.random import dropout
from asgrad.tensor.ops._spatial import Pair, pair, window_attrs
from asgrad.tensor.ops.conv import conv_attrs
from asgrad.tensor.registry import TensorType

__all__ = ["NN_LOWERINGS"]

Attrs = Mapping[str, Any]


def _hw(t: TensorType) -> Pair:
    return int(t.shape[2]), int(t.shape[3])


def _optional(ins: list[GpuArray], i: int) -> GpuArray | None:
    return ins[i] if len(ins) > i else None


# -- convolution ------------------------------------------------------------------------
def _conv2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    x, w = ins[0], ins[1]
    return conv.conv2d(x, w, _optional(ins, 2), stride, padding, dilation, groups, _hw(out))


def _conv2d_backward_input(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    g, w, x = ins
    return conv.conv2d_input_grad(g, w, x.shape, stride, padding, dilation, groups)


def _conv2d_backward_weight(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    kernel = pair(attrs["kernel_size"], "kernel_size", minimum=1)
    x, g = ins
    return conv.conv2d_weight_grad(x, g, kernel, stride, padding, dilation, groups)


def _conv_transpose2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    # the transposed convolution is conv2d's input gradient, its input playing gy
    stride, padding, dilation, groups = conv_attrs(attrs)
    x, w = ins[0], ins[1]
    return conv.conv2d_input_grad(
        x, w, tuple(out.shape), stride, padding, dilation, groups, bias=_optional(ins, 2)
    )


# -- pooling ----------------------------------------------------------------------------------
def _max_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    return pool.max_pool2d(ins[0], kernel, stride, padding, _hw(out))


def _max_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    g, x = ins
    return pool.max_pool2d_backward(g, x, kernel, stride, padding)


def _max_pool2d_select(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    h, x = ins
    return pool.max_pool2d_select(h, x, kernel, stride, padding, _hw(out))


def _include_pad(attrs: Attrs) -> bool:
    return bool(attrs.get("count_include_pad", True))


def _avg_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    return pool.avg_pool2d(ins[0], kernel, stride, padding, _hw(out), _include_pad(attrs))


def _avg_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    g, x = ins
    return pool.avg_pool2d_backward(g, x.shape, kernel, stride, padding, _include_pad(attrs))


def _adaptive_avg_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return pool.adaptive_avg_pool2d(ins[0], _hw(out))


def _adaptive_avg_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins
    return pool.adaptive_avg_pool2d_backward(g, x.shape)


# -- normalisation and dropout ---------------------------------------------------------------
def _eps(attrs: Attrs) -> float:
    return float(attrs.get("eps", 1e-5))


def _norm_axes(attrs: Attrs) -> int:
    return len(tuple(attrs["normalized_shape"]))


def _layer_norm(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return norm.layer_norm(
        ins[0], _norm_axes(attrs), _eps(attrs), _optional(ins, 1), _optional(ins, 2)
    )


def _layer_norm_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins[0], ins[1]
    return norm.layer_norm(x, _norm_axes(attrs), _eps(attrs), _optional(ins, 2), g=g)


def _batch_norm(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return norm.batch_norm(ins[0], _eps(attrs), _optional(ins, 1), _optional(ins, 2))


def _batch_norm_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins[0], ins[1]
    return norm.batch_norm(x, _eps(attrs), _optional(ins, 2), g=g)


def _dropout(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    x, seed = ins
    return dropout(x, seed, float(attrs["p"]))


NN_LOWERINGS: dict[str, Lowering] = {
    "conv2d": _conv2d,
    "conv2d_backward_input": _conv2d_backward_input,
    "conv2d_backward_weight": _conv2d_backward_weight,
    "conv_transpose2d": _conv_transpose2d,
    "max_pool2d": _max_pool2d,
    "max_pool2d_backward": _max_pool2d_backward,
    "max_pool2d_select": _max_pool2d_select,
    "avg_pool2d": _avg_pool2d,
    "avg_pool2d_backward": _avg_pool2d_backward,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
    "layer_norm": _layer_norm,
    "layer_norm_backward": _layer_norm_backward,
    "batch_norm": _batch_norm,
    "batch_norm_backward": _batch_norm_backward,
    "dropout": _dropout,
}

LOWERINGS.update(NN_LOWERINGS)
