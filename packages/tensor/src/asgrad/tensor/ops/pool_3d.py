"""3-D pooling: the depth taps of the window, each a 2-D pool of a depth slice.

``max_pool3d`` is the maximum over the window's depth taps of ``max_pool2d`` on the
(N, C * D_out, H, W) slice each tap reads (the input padded with -inf in depth),
``avg_pool3d`` the sum of ``avg_pool2d``'s over the taps divided by PyTorch's divisor,
``adaptive_avg_pool3d`` the mean over each depth window of ``adaptive_avg_pool2d``.
Each expands into those ops (``OpDef.expand``), so gradients and GPU kernels are theirs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn, require_float
from asgrad.tensor.ir.registry import Attrs, OpCase, TensorType, register_expanding
from asgrad.tensor.ops._depth import depth_taps, pad_axis, pad_np, triple

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _window(attrs: Attrs) -> tuple[tuple[int, int, int], ...]:
    kernel = triple(attrs["kernel_size"])
    stride = kernel if attrs.get("stride") is None else triple(attrs["stride"])
    return kernel, stride, triple(attrs.get("padding", 0))


def _out(shape: Sequence[int], attrs: Attrs) -> tuple[int, ...]:
    kernel, stride, padding = _window(attrs)
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise ShapeError(f"padding {list(padding)} must be at most half the kernel {list(kernel)}")
    out = tuple((shape[2 + i] + 2 * padding[i] - kernel[i]) // stride[i] + 1 for i in range(3))
    if min(out) <= 0:
        raise ShapeError(f"the pooled size {list(out)} of input {list(shape)} is not positive")
    return out


def _infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    if len(x.shape) != 5:
        raise ShapeError(f"3-D pooling needs (N, C, D, H, W), got {x}")
    return TensorType((*x.shape[:2], *_out(x.shape, attrs)), x.dtype)


def _windows_np(x: np.ndarray, attrs: Attrs, value: float) -> list[np.ndarray]:
    kernel, stride, padding = _window(attrs)
    out = _out(x.shape, attrs)
    xp = pad_np(x, padding, value)
    taps = []
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            for c in range(kernel[2]):
                taps.append(
                    xp[
                        :,
                        :,
                        a : a + (out[0] - 1) * stride[0] + 1 : stride[0],
                        b : b + (out[1] - 1) * stride[1] + 1 : stride[1],
                        c : c + (out[2] - 1) * stride[2] + 1 : stride[2],
                    ]
                )
    return taps


def _max_pool3d(x: np.ndarray, **attrs: Any) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(np.max(np.stack(_windows_np(x, attrs, -np.inf)), axis=0))


def _divisor(shape: Sequence[int], attrs: Attrs) -> np.ndarray:
    """PyTorch's divisor of each output (D_out, H_out, W_out)."""
    kernel, stride, padding = _window(attrs)
    if attrs.get("count_include_pad", True):
        return np.full(_out(shape, attrs), float(math.prod(kernel)))
    counts = []
    for i, n in enumerate(_out(shape, attrs)):
        start = np.arange(n) * stride[i] - padding[i]
        counts.append(np.minimum(start + kernel[i], shape[2 + i]) - np.maximum(start, 0))
    return np.asarray(np.einsum("i,j,k->ijk", *counts), dtype=np.float64)


def _avg_pool3d(x: np.ndarray, **attrs: Any) -> np.ndarray:
    total = np.sum(np.stack(_windows_np(x, attrs, 0.0)), axis=0)
    return np.asarray(total / _divisor(x.shape, attrs), dtype=x.dtype)


def _planes(x: Tensor, attrs: Attrs, value: float) -> tuple[list[Tensor], tuple[int, ...]]:
    """The depth taps' slices, each as (N, C * D_out, H, W), and the output size."""
    kernel, stride, padding = _window(attrs)
    out = _out(x.shape, attrs)
    xp = pad_axis(x, 2, padding[0], padding[0], value)
    c, h, w = x.shape[1], x.shape[3], x.shape[4]
    taps = depth_taps(xp, kernel[0], stride[0], 1, out[0])
    return [t.reshape(-1, c * out[0], h, w) for t in taps], out


def _plane_attrs(attrs: Attrs, **extra: Any) -> dict[str, Any]:
    kernel, stride, padding = _window(attrs)
    return {"kernel_size": kernel[1:], "stride": stride[1:], "padding": padding[1:], **extra}


def _expand_max(x: Tensor, **attrs: Any) -> Tensor:
    planes, out = _planes(x, attrs, -math.inf)
    pooled = [x.graph.apply("max_pool2d", (p,), _plane_attrs(attrs)) for p in planes]
    y = pooled[0]
    for p in pooled[1:]:
        y = y.maximum(p)
    return y.reshape(-1, x.shape[1], *out)


def _expand_avg(x: Tensor, **attrs: Any) -> Tensor:
    planes, out = _planes(x, attrs, 0.0)
    kernel = _window(attrs)[0]
    plain = _plane_attrs(attrs, count_include_pad=True)
    pooled = [x.graph.apply("avg_pool2d", (p,), plain) for p in planes]
    total = pooled[0]
    for p in pooled[1:]:
        total = total + p
    scale = (kernel[1] * kernel[2]) / _divisor(x.shape, attrs)
    return total.reshape(-1, x.shape[1], *out) * x.graph.constant(scale, x.dtype)


# -- adaptive --------------------------------------------------------------------------------
def _infer_adaptive(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    size = triple(attrs["output_size"])
    if len(x.shape) != 5 or min(size) <= 0:
        raise ShapeError(f"adaptive 3-D pooling needs (N, C, D, H, W) and positive sizes, got {x}")
    return TensorType((*x.shape[:2], *size), x.dtype)


def _bounds(n: int, out: int) -> list[tuple[int, int]]:
    return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


def _adaptive_np(x: np.ndarray, output_size: Any) -> np.ndarray:
    size = triple(output_size)
    out = np.empty((*x.shape[:2], *size), dtype=x.dtype)
    for i, (a0, a1) in enumerate(_bounds(x.shape[2], size[0])):
        for j, (b0, b1) in enumerate(_bounds(x.shape[3], size[1])):
            for k, (c0, c1) in enumerate(_bounds(x.shape[4], size[2])):
                out[:, :, i, j, k] = x[:, :, a0:a1, b0:b1, c0:c1].mean(axis=(2, 3, 4))
    return out


def _expand_adaptive(x: Tensor, output_size: Any) -> Tensor:
    size = triple(output_size)
    g = x.graph
    means = []
    for a0, a1 in _bounds(x.shape[2], size[0]):
        plane = x[:, :, a0:a1].mean(axis=2)  # (N, C, H, W)
        means.append(g.apply("adaptive_avg_pool2d", (plane,), {"output_size": size[1:]}))
    return g.apply("concat", [m.expand_dims(2) for m in means], {"axis": 2})


# -- cases and registration ------------------------------------------------------------------
def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.05 - 1.0


def _max_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((_distinct(rng, 2, 2, 4, 4, 4),), {"kernel_size": 2, "stride": None, "padding": 0}),
        OpCase(
            (_distinct(rng, 1, 2, 5, 6, 5),),
            {"kernel_size": (3, 2, 3), "stride": (2, 1, 2), "padding": (1, 1, 1)},
            label="padded",
        ),
    ]


def _avg_cases(rng: np.random.Generator) -> list[OpCase]:
    a = {"kernel_size": (3, 2, 3), "stride": (2, 1, 2), "padding": (1, 1, 1)}
    return [
        OpCase((randn(rng, 2, 2, 4, 4, 4),), {"kernel_size": 2, "stride": None, "padding": 0}),
        OpCase((randn(rng, 1, 2, 5, 6, 5),), {**a, "count_include_pad": True}, label="include"),
        OpCase((randn(rng, 1, 2, 5, 6, 5),), {**a, "count_include_pad": False}, label="exclude"),
    ]


def _adaptive_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 2, 5, 6, 4),), {"output_size": (2, 3, 2)}, label="down"),
        OpCase((randn(rng, 1, 1, 3, 3, 3),), {"output_size": 1}, label="global"),
    ]


_register = functools.partial(register_expanding, family="pool", arity=1, tolerance=(1e-05, 1e-06))


_register("max_pool3d", _infer, _max_pool3d, _expand_max, _max_cases, "3-D max pooling")
_register("avg_pool3d", _infer, _avg_pool3d, _expand_avg, _avg_cases, "3-D average pooling")
_register(
    "adaptive_avg_pool3d",
    _infer_adaptive,
    _adaptive_np,
    _expand_adaptive,
    _adaptive_cases,
    "3-D average pooling to a fixed output_size",
)
