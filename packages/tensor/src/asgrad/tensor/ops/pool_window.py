"""2-D pooling with PyTorch's further window options, as ops that expand into others.

* ``max_pool2d_general``: ``dilation`` and ``ceil_mode`` (and any padding up to half
  the dilated kernel);
* ``max_pool2d_indices``: where each maximum is, as PyTorch's ``return_indices``
  (the flat index ``h * W + w`` in the input, the first maximum of a window);
* ``avg_pool2d_general``: ``ceil_mode`` and ``divisor_override``.

The input is padded explicitly (``-inf`` for max, 0 for mean; on the right also by
what ``ceil_mode`` adds), then reduced with the plain ``max_pool2d``/``avg_pool2d``
ops or, with a dilation, as the maximum of the window's strided slices; a mean is
divided by a constant table of PyTorch's divisors. The output sizes are PyTorch's
(``pooling_output_shape``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.registry import Attrs, OpCase, TensorType, register_expanding
from asgrad.tensor.ops.spatial import Pair, require_nchw

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def out_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil: bool) -> int:
    """PyTorch's pooled size (``pooling_output_shape``)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _window(attrs: Attrs) -> tuple[Pair, Pair, Pair, Pair, bool]:
    kernel = tuple(int(v) for v in attrs["kernel_size"])
    stride = tuple(int(v) for v in attrs["stride"])
    padding = tuple(int(v) for v in attrs["padding"])
    dilation = tuple(int(v) for v in attrs.get("dilation", (1, 1)))
    return kernel, stride, padding, dilation, bool(attrs.get("ceil_mode", False))  # type: ignore[return-value]


def _out_hw(shape: Sequence[int], attrs: Attrs) -> Pair:
    kernel, stride, padding, dilation, ceil = _window(attrs)
    for i in range(2):
        if padding[i] * 2 > dilation[i] * (kernel[i] - 1) + 1:
            raise ShapeError(
                f"padding {list(padding)} must be at most half the (dilated) kernel"
                f" {list(kernel)} (PyTorch's rule)"
            )
    ohw = tuple(
        out_size(shape[2 + i], kernel[i], stride[i], padding[i], dilation[i], ceil)
        for i in range(2)
    )
    if min(ohw) <= 0:
        raise ShapeError(f"the pooled size {list(ohw)} of input {list(shape)} is not positive")
    return ohw  # type: ignore[return-value]


def _infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_nchw(x, "input")
    divisor = attrs.get("divisor_override")
    if divisor is not None and int(divisor) <= 0:
        raise ShapeError(f"divisor_override must be positive, got {divisor}")
    return TensorType((*x.shape[:2], *_out_hw(x.shape, attrs)), x.dtype)


def _infer_indices(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(_infer(types, attrs).shape, "int64")


def _right_pad(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """The padding after the input that the last window reaches (at least 0)."""
    return max((out - 1) * stride + dilation * (kernel - 1) + 1 - size - pad, 0)


# -- numpy kernels --------------------------------------------------------------------------
def _padded_np(x: np.ndarray, attrs: Attrs, value: float) -> np.ndarray:
    kernel, stride, padding, dilation, _ = _window(attrs)
    oh, ow = _out_hw(x.shape, attrs)
    right = [
        _right_pad(x.shape[2 + i], (oh, ow)[i], kernel[i], stride[i], padding[i], dilation[i])
        for i in range(2)
    ]
    widths = ((0, 0), (0, 0), (padding[0], right[0]), (padding[1], right[1]))
    return np.pad(x, widths, constant_values=value)


def _candidates_np(x: np.ndarray, attrs: Attrs, value: float) -> list[np.ndarray]:
    kernel, stride, _, dilation, _ = _window(attrs)
    oh, ow = _out_hw(x.shape, attrs)
    xp = _padded_np(x, attrs, value)
    return [
        xp[
            :,
            :,
            i * dilation[0] : i * dilation[0] + (oh - 1) * stride[0] + 1 : stride[0],
            j * dilation[1] : j * dilation[1] + (ow - 1) * stride[1] + 1 : stride[1],
        ]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def _max_pool(x: np.ndarray, **attrs: Any) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(np.max(np.stack(_candidates_np(x, attrs, -np.inf)), axis=0))


def _offsets(shape: Sequence[int], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    """The flat input index of each window's first tap, (OH, OW), and each tap's
    offset from it, (kh * kw,)."""
    kernel, stride, padding, dilation, _ = _window(attrs)
    oh, ow = _out_hw(shape, attrs)
    width = shape[3]
    rows = np.arange(oh) * stride[0] - padding[0]
    cols = np.arange(ow) * stride[1] - padding[1]
    base = rows[:, None] * width + cols[None, :]
    taps = np.array(
        [
            i * dilation[0] * width + j * dilation[1]
            for i in range(kernel[0])
            for j in range(kernel[1])
        ]
    )
    return base.astype(np.int64), taps.astype(np.int64)


def _max_indices(x: np.ndarray, **attrs: Any) -> np.ndarray:
    first = np.argmax(np.stack(_candidates_np(x, attrs, -np.inf)), axis=0)  # a NaN wins
    base, taps = _offsets(x.shape, attrs)
    return np.asarray(base + taps[first], dtype=np.int64)


def _divisors(shape: Sequence[int], attrs: Attrs) -> np.ndarray:
    """PyTorch's divisor of each output of ``avg_pool2d`` (OH, OW)."""
    kernel, stride, padding, _, _ = _window(attrs)
    override = attrs.get("divisor_override")
    include = bool(attrs.get("count_include_pad", True))
    ohw = _out_hw(shape, attrs)
    counts = []
    for i in range(2):
        start = np.arange(ohw[i]) * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], shape[2 + i] + padding[i])
        inside = np.minimum(end, shape[2 + i]) - np.maximum(start, 0)
        counts.append(end - start if include else inside)
    table = np.outer(counts[0], counts[1]).astype(np.float64)
    return np.full(ohw, float(override)) if override is not None else table


def _avg_pool(x: np.ndarray, **attrs: Any) -> np.ndarray:
    total = np.sum(np.stack(_candidates_np(x, attrs, 0.0)), axis=0)
    return np.asarray(total / _divisors(x.shape, attrs), dtype=x.dtype)


# -- expansions -----------------------------------------------------------------------------
def _pad(x: Tensor, axis: int, before: int, after: int, value: float) -> Tensor:
    """``x`` with ``before``/``after`` elements of ``value`` along ``axis`` (2 or 3)."""
    if not before and not after:
        return x
    g = x.graph
    edge = x[(slice(None),) * axis + (slice(0, 1),)]
    parts = []
    for width in (before, after):
        shape = [1, 1, 1, 1]
        shape[axis] = width
        off = g.constant(np.zeros(shape, dtype=bool), "bool")
        parts.append(
            g.apply("where", (off, edge, g.constant(value, x.dtype)), {}) if width else None
        )
    pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
    return g.apply("concat", pieces, {"axis": axis})


def _padded(x: Tensor, attrs: Attrs, value: float) -> Tensor:
    kernel, stride, padding, dilation, _ = _window(attrs)
    ohw = _out_hw(x.shape, attrs)
    for i in range(2):
        right = _right_pad(x.shape[2 + i], ohw[i], kernel[i], stride[i], padding[i], dilation[i])
        x = _pad(x, 2 + i, padding[i], right, value)
    return x


def _candidates(x: Tensor, attrs: Attrs, value: float) -> list[Tensor]:
    kernel, stride, _, dilation, _ = _window(attrs)
    oh, ow = _out_hw(x.shape, attrs)
    xp = _padded(x, attrs, value)
    return [
        xp[
            :,
            :,
            i * dilation[0] : i * dilation[0] + (oh - 1) * stride[0] + 1 : stride[0],
            j * dilation[1] : j * dilation[1] + (ow - 1) * stride[1] + 1 : stride[1],
        ]
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def _crop(y: Tensor, ohw: Pair) -> Tensor:
    return y if tuple(y.shape[2:]) == ohw else y[:, :, : ohw[0], : ohw[1]]


def _expand_max(x: Tensor, **attrs: Any) -> Tensor:
    kernel, stride, _, dilation, _ = _window(attrs)
    if dilation == (1, 1):  # the plain op over the padded input
        xp = _padded(x, attrs, -math.inf)
        plain = {"kernel_size": kernel, "stride": stride, "padding": (0, 0)}
        return _crop(x.graph.apply("max_pool2d", (xp,), plain), _out_hw(x.shape, attrs))
    taps = _candidates(x, attrs, -math.inf)
    out = taps[0]
    for t in taps[1:]:
        out = out.maximum(t)
    return out


def _expand_indices(x: Tensor, **attrs: Any) -> Tensor:
    g = x.graph
    taps = [t.expand_dims(0) for t in _candidates(x, attrs, -math.inf)]
    first = g.apply("concat", taps, {"axis": 0}).argmax(axis=0).cast("int64")
    base, offsets = _offsets(x.shape, attrs)
    return g.constant(offsets, "int64").gather(first, 0) + g.constant(base, "int64")


def _expand_avg(x: Tensor, **attrs: Any) -> Tensor:
    kernel, stride, _, _, _ = _window(attrs)
    xp = _padded(x, attrs, 0.0)
    plain = {"kernel_size": kernel, "stride": stride, "padding": (0, 0), "count_include_pad": True}
    mean = _crop(x.graph.apply("avg_pool2d", (xp,), plain), _out_hw(x.shape, attrs))
    scale = (kernel[0] * kernel[1]) / _divisors(x.shape, attrs)
    return mean * x.graph.constant(scale, x.dtype)


# -- cases ----------------------------------------------------------------------------------
def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0


def _attrs(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"stride": kw.get("kernel_size", (2, 2)), "padding": (0, 0)}
    out.update(kw)
    return out


_MAX_CONFIGS = [
    ((2, 2, 7, 7), _attrs(kernel_size=(2, 2), ceil_mode=True), "ceil"),
    (
        (1, 2, 8, 9),
        _attrs(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True),
        "ceil pad",
    ),
    ((1, 2, 9, 8), _attrs(kernel_size=(3, 2), stride=(1, 2), dilation=(2, 2)), "dilated"),
    (
        (1, 1, 10, 9),
        _attrs(kernel_size=(3, 3), stride=(3, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
        "all",
    ),
]


def _max_cases(rng: np.random.Generator) -> list[OpCase]:
    return [OpCase((_distinct(rng, *s),), a, label=label) for s, a, label in _MAX_CONFIGS]


def _index_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = [
        OpCase((_distinct(rng, *s),), a, grad=False, label=label) for s, a, label in _MAX_CONFIGS
    ]
    ties = np.zeros((1, 1, 4, 4))
    cases.append(OpCase((ties,), _attrs(kernel_size=(2, 2)), grad=False, label="ties"))
    return cases


def _avg_cases(rng: np.random.Generator) -> list[OpCase]:
    def case(shape: tuple[int, ...], label: str, **kw: Any) -> OpCase:
        kw.setdefault("count_include_pad", True)
        kw.setdefault("divisor_override", None)
        return OpCase((randn(rng, *shape),), _attrs(**kw), label=label)

    return [
        case((2, 2, 7, 7), "ceil", kernel_size=(2, 2), ceil_mode=True),
        case(
            (1, 2, 8, 9),
            "ceil pad",
            kernel_size=(3, 3),
            stride=(2, 2),
            padding=(1, 1),
            ceil_mode=True,
        ),
        case(
            (1, 2, 8, 9),
            "ceil pad exclude",
            kernel_size=(3, 3),
            stride=(2, 2),
            padding=(1, 1),
            ceil_mode=True,
            count_include_pad=False,
        ),
        case(
            (1, 1, 6, 6),
            "divisor",
            kernel_size=(3, 3),
            stride=(2, 2),
            padding=(1, 1),
            divisor_override=4,
        ),
    ]


_register = functools.partial(register_expanding, family="pool", arity=1, tolerance=(1e-05, 1e-06))


_register(
    "max_pool2d_general",
    _infer,
    _max_pool,
    _expand_max,
    _max_cases,
    "max pooling with dilation and ceil_mode",
)
_register(
    "max_pool2d_indices",
    _infer_indices,
    _max_indices,
    _expand_indices,
    _index_cases,
    "the flat input index (h * W + w) of each window's first maximum",
    differentiable=False,
)
_register(
    "avg_pool2d_general",
    _infer,
    _avg_pool,
    _expand_avg,
    _avg_cases,
    "average pooling with ceil_mode and divisor_override",
)
