"""1-D convolution and pooling, resampling and pixel shuffles, in PyTorch's
functional names and argument names.

Each appends one op that expands into others: the 1-D ops into their 2-D ops over a
unit height (``tensor/ops/conv_1d.py``, ``pool_1d.py``), ``interpolate`` into gathers
and weighted sums (``pool_resize.py``), the pixel shuffles into shape ops
(``shape_pixel.py``); so each has their kernels, gradients and GPU twins.

>>> import numpy as np
>>> from asgrad.tensor import Graph
>>> from asgrad.tensor.api.nn_spatial import conv1d, max_pool1d
>>> g = Graph()
>>> x = g.input("x", (2, 3, 16))
>>> w = g.constant(np.ones((4, 3, 3), np.float32))
>>> max_pool1d(conv1d(x, w, padding=1), 2).shape
(2, 4, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgrad.tensor.api import nn_functional as _plain
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ShapeError
from asgrad.tensor.ir.common import int_arg
from asgrad.tensor.ir.registry import given_attrs
from asgrad.tensor.ops.pool_resize import output_size
from asgrad.tensor.ops.pool_unpool import unpool_size
from asgrad.tensor.ops.spatial import pair

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "conv1d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose3d",
    "interpolate",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_unpool2d",
    "pixel_shuffle",
    "pixel_unshuffle",
    "upsample",
]


def _int(value: int | tuple[int], what: str) -> int:
    """An int, or a 1-tuple of one (PyTorch accepts both)."""
    if isinstance(value, tuple | list):
        if len(value) != 1:
            raise ShapeError(f"{what} must be an int or a 1-tuple, got {value!r}")
        value = value[0]
    return int_arg(value, what)


def _with_bias(x: Tensor, w: Tensor, b: Tensor | None) -> tuple[Tensor, ...]:
    return (x, w) if b is None else (x, w, b)


def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] | str = 0,
    dilation: int | tuple[int] = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution of ``x`` (N, C, L) with ``weight`` (O, C/groups, K); ``padding``
    an int, ``"valid"`` or ``"same"`` (stride 1, odd dilated kernel).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import conv1d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8))
    >>> w = g.input("w", (6, 4, 3))
    >>> conv1d(x, w, padding=1).shape
    (1, 6, 8)
    """
    st, dil = _int(stride, "conv1d's stride"), _int(dilation, "conv1d's dilation")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ShapeError(f"padding must be an int, 'same' or 'valid', got {padding!r}")
        total = dil * (weight.shape[-1] - 1)
        if padding == "same" and (st != 1 or total % 2):
            raise ShapeError("padding='same' needs stride 1 and an odd (dilated) kernel")
        pad = total // 2 if padding == "same" else 0
    else:
        pad = _int(padding, "conv1d's padding")
    attrs = {"stride": st, "padding": pad, "dilation": dil, "groups": int(groups)}
    return x.graph.apply("conv1d", _with_bias(x, weight, bias), attrs)


def conv_transpose1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] = 0,
    output_padding: int | tuple[int] = 0,
    groups: int = 1,
    dilation: int | tuple[int] = 1,
) -> Tensor:
    """Transposed 1-D convolution of ``x`` (N, C_in, L) with ``weight``
    (C_in, C_out/groups, K), PyTorch's argument order.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import conv_transpose1d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8))
    >>> w = g.input("w", (4, 6, 2))
    >>> conv_transpose1d(x, w, stride=2).shape
    (1, 6, 16)
    """
    attrs = {
        "stride": _int(stride, "conv_transpose1d's stride"),
        "padding": _int(padding, "conv_transpose1d's padding"),
        "output_padding": _int(output_padding, "conv_transpose1d's output_padding"),
        "dilation": _int(dilation, "conv_transpose1d's dilation"),
        "groups": int(groups),
    }
    return x.graph.apply("conv_transpose1d", _with_bias(x, weight, bias), attrs)


def _pool_attrs(
    kernel_size: int | tuple[int], stride: int | tuple[int] | None, padding: int | tuple[int]
) -> dict[str, int]:
    kernel = _int(kernel_size, "kernel_size")
    return {
        "kernel_size": kernel,
        "stride": kernel if stride is None else _int(stride, "stride"),
        "padding": _int(padding, "padding"),
    }


def max_pool1d(
    x: Tensor,
    kernel_size: int | tuple[int],
    stride: int | tuple[int] | None = None,
    padding: int | tuple[int] = 0,
) -> Tensor:
    """The max of each window of ``kernel_size`` (stride defaults to it).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import max_pool1d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8))
    >>> max_pool1d(x, 2).shape
    (1, 4, 4)
    """
    return x.graph.apply("max_pool1d", (x,), _pool_attrs(kernel_size, stride, padding))


def avg_pool1d(
    x: Tensor,
    kernel_size: int | tuple[int],
    stride: int | tuple[int] | None = None,
    padding: int | tuple[int] = 0,
    count_include_pad: bool | None = None,
) -> Tensor:
    """The mean of each window; zero padding counts unless ``count_include_pad=False``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_spatial import avg_pool1d
    >>> g = Graph()
    >>> x = g.input("x", (1, 1, 4))
    >>> evaluate(avg_pool1d(x, 2), {"x": [[[1.0, 3.0, 5.0, 7.0]]]})[0].tolist()
    [[[2.0, 6.0]]]
    """
    attrs = {
        **_pool_attrs(kernel_size, stride, padding),
        **given_attrs(count_include_pad=count_include_pad),
    }
    return x.graph.apply("avg_pool1d", (x,), attrs)


def adaptive_avg_pool1d(x: Tensor, output_size: int | tuple[int]) -> Tensor:
    """Average pooling to ``output_size`` positions (PyTorch's window bounds).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import adaptive_avg_pool1d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8))
    >>> adaptive_avg_pool1d(x, 2).shape
    (1, 4, 2)
    """
    size = _int(output_size, "output_size")
    return x.graph.apply("adaptive_avg_pool1d", (x,), {"output_size": size})


def interpolate(
    x: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial axes of ``x`` (N, C, *spatial) to ``size``, or by
    ``scale_factor`` (output ``floor(n * scale)``), as PyTorch's ``F.interpolate``:
    ``mode`` nearest, nearest-exact, linear (1-D), bilinear or bicubic (2-D),
    trilinear (3-D). ``antialias`` is not supported.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import interpolate
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> interpolate(x, scale_factor=2, mode="bilinear").shape
    (1, 4, 16, 16)
    """
    if antialias:
        raise ArgumentError("interpolate: antialias=True is not supported")
    sizes, scales = output_size(x.shape, size, scale_factor)
    if recompute_scale_factor:
        scales = None  # the coordinates follow in/out, as PyTorch then does
    attrs = {"size": sizes, "mode": mode, "align_corners": align_corners, "scales": scales}
    return x.graph.apply("interpolate", (x,), attrs)


def upsample(
    x: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """[`interpolate`][asgrad.tensor.api.nn_spatial.interpolate] (PyTorch's older name).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import upsample
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> upsample(x, size=(10, 12)).shape
    (1, 4, 10, 12)
    """
    return interpolate(x, size, scale_factor, mode, align_corners)


def pixel_shuffle(x: Tensor, upscale_factor: int) -> Tensor:
    """(N, C r^2, H, W) to (N, C, H r, W r).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import pixel_shuffle
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> pixel_shuffle(x, 2).shape
    (1, 1, 16, 16)
    """
    r = int_arg(upscale_factor, "upscale_factor")
    return x.graph.apply("pixel_shuffle", (x,), {"upscale_factor": r})


def pixel_unshuffle(x: Tensor, downscale_factor: int) -> Tensor:
    """(N, C, H r, W r) to (N, C r^2, H, W).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import pixel_unshuffle
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> pixel_unshuffle(x, 2).shape
    (1, 16, 4, 4)
    """
    r = int_arg(downscale_factor, "downscale_factor")
    return x.graph.apply("pixel_unshuffle", (x,), {"downscale_factor": r})


IntOrPair = int | Sequence[int]


def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """PyTorch's ``F.max_pool2d``: the max of each window, with ``dilation`` and
    ``ceil_mode``; ``return_indices`` also gives each maximum's flat index ``h * W + w``
    in its input plane (int64), as ``max_unpool2d`` reads them.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import max_pool2d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> max_pool2d(x, 2, stride=1).shape
    (1, 4, 7, 7)
    """
    kernel = pair(kernel_size, "kernel_size", minimum=1)
    st = kernel if stride is None else pair(stride, "stride", minimum=1)
    pad, dil = pair(padding, "padding"), pair(dilation, "dilation", minimum=1)
    attrs = {
        "kernel_size": kernel,
        "stride": st,
        "padding": pad,
        "dilation": dil,
        "ceil_mode": bool(ceil_mode),
    }
    if dil == (1, 1) and not ceil_mode:
        y = _plain.max_pool2d(x, kernel, st, pad)
    else:
        y = x.graph.apply("max_pool2d_general", (x,), attrs)
    if not return_indices:
        return y
    return y, x.graph.apply("max_pool2d_indices", (x,), attrs)


def avg_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """PyTorch's ``F.avg_pool2d``: the mean of each window, with ``ceil_mode`` and
    ``divisor_override`` (each window's sum divided by it).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import avg_pool2d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> avg_pool2d(x, 2).shape
    (1, 4, 4, 4)
    """
    kernel = pair(kernel_size, "kernel_size", minimum=1)
    st = kernel if stride is None else pair(stride, "stride", minimum=1)
    pad = pair(padding, "padding")
    if not ceil_mode and divisor_override is None:
        return _plain.avg_pool2d(x, kernel, st, pad, count_include_pad)
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ArgumentError(f"divisor_override must be positive, got {divisor_override}")
    attrs = {
        "kernel_size": kernel,
        "stride": st,
        "padding": pad,
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "divisor_override": None if divisor_override is None else int(divisor_override),
    }
    return x.graph.apply("avg_pool2d_general", (x,), attrs)


Triple = int | Sequence[int]


def conv3d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Triple = 1,
    padding: Triple = 0,
    dilation: Triple = 1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution of ``x`` (N, C, D, H, W) with ``weight`` (O, C/groups, kD, kH, kW).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import conv3d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8, 8))
    >>> w = g.input("w", (6, 4, 3, 3, 3))
    >>> conv3d(x, w).shape
    (1, 6, 6, 6, 6)
    """
    attrs = {
        "stride": _triple(stride, "stride"),
        "padding": _triple(padding, "padding"),
        "dilation": _triple(dilation, "dilation"),
        "groups": int(groups),
    }
    return x.graph.apply("conv3d", _with_bias(x, weight, bias), attrs)


def _triple(value: Triple, what: str) -> tuple[int, int, int]:
    items = (value,) * 3 if isinstance(value, int) else tuple(value)
    if len(items) != 3:
        raise ShapeError(f"{what} must be an int or three ints, got {value!r}")
    a, b, c = (int_arg(v, what) for v in items)
    return a, b, c


def _pool3d_attrs(kernel_size: Triple, stride: Triple | None, padding: Triple) -> dict[str, Any]:
    """A 3-D pool's window attributes, each a triple (``stride`` None: the kernel's)."""
    return {
        "kernel_size": _triple(kernel_size, "kernel_size"),
        "stride": None if stride is None else _triple(stride, "stride"),
        "padding": _triple(padding, "padding"),
    }


def max_pool3d(
    x: Tensor, kernel_size: Triple, stride: Triple | None = None, padding: Triple = 0
) -> Tensor:
    """The max of each kD x kH x kW window of (N, C, D, H, W).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import max_pool3d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8, 8))
    >>> max_pool3d(x, 2).shape
    (1, 4, 4, 4, 4)
    """
    return x.graph.apply("max_pool3d", (x,), _pool3d_attrs(kernel_size, stride, padding))


def avg_pool3d(
    x: Tensor,
    kernel_size: Triple,
    stride: Triple | None = None,
    padding: Triple = 0,
    count_include_pad: bool | None = None,
) -> Tensor:
    """The mean of each kD x kH x kW window; zero padding counts unless
    ``count_include_pad=False``.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import avg_pool3d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8, 8))
    >>> avg_pool3d(x, 2).shape
    (1, 4, 4, 4, 4)
    """
    attrs = {
        **_pool3d_attrs(kernel_size, stride, padding),
        **given_attrs(count_include_pad=count_include_pad),
    }
    return x.graph.apply("avg_pool3d", (x,), attrs)


def adaptive_avg_pool3d(x: Tensor, output_size: Triple) -> Tensor:
    """Average pooling of (N, C, D, H, W) to ``output_size`` (PyTorch's windows).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import adaptive_avg_pool3d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8, 8))
    >>> adaptive_avg_pool3d(x, (2, 2, 2)).shape
    (1, 4, 2, 2, 2)
    """
    size = _triple(output_size, "output_size")
    return x.graph.apply("adaptive_avg_pool3d", (x,), {"output_size": size})


def conv_transpose3d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Triple = 1,
    padding: Triple = 0,
    output_padding: Triple = 0,
    groups: int = 1,
    dilation: Triple = 1,
) -> Tensor:
    """Transposed 3-D convolution of ``x`` (N, C_in, D, H, W) with ``weight``
    (C_in, C_out/groups, kD, kH, kW), PyTorch's argument order.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import conv_transpose3d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8, 8))
    >>> w = g.input("w", (4, 6, 2, 2, 2))
    >>> conv_transpose3d(x, w, stride=2).shape
    (1, 6, 16, 16, 16)
    """
    attrs = {
        "stride": _triple(stride, "stride"),
        "padding": _triple(padding, "padding"),
        "output_padding": _triple(output_padding, "output_padding"),
        "dilation": _triple(dilation, "dilation"),
        "groups": int(groups),
    }
    return x.graph.apply("conv_transpose3d", _with_bias(x, weight, bias), attrs)


def max_unpool2d(
    x: Tensor,
    indices: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """PyTorch's ``F.max_unpool2d``: each value of ``x`` written at its flat position in
    ``indices`` (from ``max_pool2d(..., return_indices=True)``), zeros elsewhere; the
    output is ``(h - 1) * stride - 2 * padding + kernel`` per axis unless ``output_size``
    (the last two sizes) is given.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_spatial import max_pool2d, max_unpool2d
    >>> x = Graph().input("x", (1, 4, 8, 8))
    >>> pooled, indices = max_pool2d(x, 2, return_indices=True)
    >>> max_unpool2d(pooled, indices, 2).shape
    (1, 4, 8, 8)
    """
    kernel = pair(kernel_size, "kernel_size", minimum=1)
    st = kernel if stride is None else pair(stride, "stride", minimum=1)
    size = unpool_size(x.shape, kernel, st, pair(padding, "padding"))
    if output_size is not None:
        size = (int(output_size[-2]), int(output_size[-1]))
    return x.graph.apply("max_unpool2d", (x, indices), {"output_size": size})
