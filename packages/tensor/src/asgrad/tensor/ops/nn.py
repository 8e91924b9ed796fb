"""Fused normalisation ops (layer norm, batch norm) and seeded dropout.

Layer norm and batch norm are fused primitives: one numpy kernel for the forward
pass and one for the input gradient (``*_backward``), each a registered op. Their
weight and bias gradients are plain reductions in graph ops, and the gradients of
the backward ops come from differentiating the unfused definition, so
higher-order gradients work.

Dropout draws its mask from a counter-based hash of ``(seed, element index)``,
not from a stateful generator: the mask is a pure function of the seed input,
reproducible by any backend (the WGSL twin computes the same 32-bit hash), and a
training program gets a fresh mask each step by advancing the seed (a fed value,
or a Variable the program increments through its updates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.dtypes import is_int
from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ops._common import randn, require_float, same_dtype
from asgrad.tensor.registry import Attrs, OpCase, OpDef, TensorType, register_op

_NORM_TOLERANCE = (1e-4, 1e-5)


# -- shared normalisation ------------------------------------------------------------
def layer_norm_axes(ndim: int, attrs: Attrs) -> tuple[int, ...]:
    """The trailing axes that ``normalized_shape`` covers."""
    k = len(tuple(attrs["normalized_shape"]))
    return tuple(range(ndim - k, ndim))


def batch_norm_axes(ndim: int) -> tuple[int, ...]:
    """Every axis but the channel axis 1."""
    return (0, *range(2, ndim))


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``(x_hat, 1 / std)`` with the population variance over ``axes``."""
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    return centered * rstd, rstd


def _normalize_backward(
    g: np.ndarray, x: np.ndarray, axes: tuple[int, ...], eps: float
) -> np.ndarray:
    """The input gradient of :func:`_normalize` for an incoming ``g`` (weight applied)."""
    x_hat, rstd = _normalize(x, axes, eps)
    mean_g = np.mean(g, axis=axes, keepdims=True)
    mean_gx = np.mean(g * x_hat, axis=axes, keepdims=True)
    out: np.ndarray = rstd * (g - mean_g - x_hat * mean_gx)
    return out


# -- layer norm ------------------------------------------------------------------------
def _check_affine(types: Sequence[TensorType], shape: tuple[int, ...], what: str) -> None:
    if len(types) == 1:
        return
    if len(types) != 3:
        raise ShapeError(
            f"takes (x) or (x, weight, bias), got {len(types)} inputs; pass a zero"
            " bias for a weight-only affine"
        )
    for t, name in ((types[1], "weight"), (types[2], "bias")):
        if t.shape != shape:
            raise ShapeError(f"{name} is {t}, expected shape {list(shape)} ({what})")
    same_dtype(types, "input, weight and bias")


def _infer_layer_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    shape = tuple(int(d) for d in attrs["normalized_shape"])
    if not shape:
        raise ShapeError("normalized_shape must name at least one trailing axis")
    if x.shape[len(x.shape) - len(shape) :] != shape or len(shape) > len(x.shape):
        raise ShapeError(
            f"input {x} does not end in normalized_shape {list(shape)}; layer norm"
            " normalises the trailing axes"
        )
    _check_affine(types, shape, "normalized_shape")
    if float(attrs.get("eps", 1e-5)) <= 0:
        raise ShapeError(f"eps must be positive, got {attrs.get('eps')}")
    return x


def _infer_layer_norm_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types[0], types[1]
    if g.shape != x.shape:
        raise ShapeError(f"gradient {g} must have the shape of the input {x}")
    same_dtype([g, x], "gradient and input")
    if len(types) == 3:
        shape = tuple(int(d) for d in attrs["normalized_shape"])
        if types[2].shape != shape:
            raise ShapeError(f"weight is {types[2]}, expected shape {list(shape)}")
    elif len(types) != 2:
        raise ShapeError(f"takes (g, x) or (g, x, weight), got {len(types)} inputs")
    return _infer_layer_norm([x], attrs)


def _layer_norm(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    normalized_shape: Any,
    eps: float = 1e-5,
) -> np.ndarray:
    if _f32_rows(x, weight):
        return _layer_norm_f32(x, weight, bias, len(tuple(normalized_shape)), eps)
    y, _ = _normalize(x, layer_norm_axes(x.ndim, {"normalized_shape": normalized_shape}), eps)
    if weight is not None and bias is not None:
        y = y * weight + bias
    return y


def _layer_norm_backward(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    normalized_shape: Any,
    eps: float = 1e-5,
) -> np.ndarray:
    if _f32_rows(x, weight) and g.dtype == np.float32:
        return _layer_norm_backward_f32(g, x, weight, len(tuple(normalized_shape)), eps)
    axes = layer_norm_axes(x.ndim, {"normalized_shape": normalized_shape})
    return _normalize_backward(g if weight is None else g * weight, x, axes, eps)


# float32 fast paths: rows of the normalised size, two fresh buffers, the rest in place;
# a row's sum of squares is one dot product (einsum), without a squared temporary.
def _f32_rows(x: np.ndarray, weight: np.ndarray | None) -> bool:
    return x.dtype == np.float32 and x.size > 0 and (weight is None or weight.dtype == np.float32)


def _row_stats(
    x: np.ndarray, k: int, eps: float, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(x - mean, 1 / std, n)`` over the trailing ``k`` axes, as (rows, n) and (rows, 1).

    ``x - mean`` is written into ``out`` (x's shape, contiguous; may be x) when given.
    """
    n = math.prod(x.shape[x.ndim - k :])
    rows = x.reshape(-1, n)
    mean = np.add.reduce(rows, axis=1, keepdims=True)
    mean *= np.float32(1.0 / n)
    centered = rows - mean if out is None else np.subtract(rows, mean, out=out.reshape(-1, n))
    rstd = np.einsum("ij,ij->i", centered, centered)[:, None]
    rstd *= np.float32(1.0 / n)
    rstd += np.float32(eps)
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    return centered, rstd, n


def _layer_norm_f32(
    x: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    k: int,
    eps: float,
    out: np.ndarray | None = None,
) -> np.ndarray:
    y, rstd, _ = _row_stats(x, k, eps, out)
    y *= rstd
    if weight is not None and bias is not None:
        y *= weight.reshape(-1)
        y += bias.reshape(-1)
    return y.reshape(x.shape)


def _layer_norm_backward_f32(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None,
    k: int,
    eps: float,
    out: np.ndarray | None = None,
    work: np.ndarray | None = None,
) -> np.ndarray:
    x_hat, rstd, n = _row_stats(x, k, eps, work)
    x_hat *= rstd
    scale = np.float32(1.0) if weight is None else weight.reshape(-1)
    gw: np.ndarray = (
        g.reshape(x_hat.shape) * scale
        if out is None
        else np.multiply(g.reshape(x_hat.shape), scale, out=out.reshape(x_hat.shape))
    )
    mean_g = np.add.reduce(gw, axis=1, keepdims=True)
    mean_g *= np.float32(1.0 / n)
    mean_gx = np.einsum("ij,ij->i", gw, x_hat)[:, None]
    mean_gx *= np.float32(1.0 / n)
    gw -= mean_g
    x_hat *= mean_gx
    gw -= x_hat
    gw *= rstd
    return gw.reshape(x.shape)


def layer_norm_into(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    out: np.ndarray,
    normalized_shape: Any,
    eps: float = 1e-5,
) -> np.ndarray:
    """The registered ``layer_norm`` kernel's float32 path, its result written into
    ``out`` (x's shape, float32, contiguous; may be x: x is read only before it is
    written), bit for bit. Only for float32 x (and weight) of nonzero size."""
    target = out if out.flags.c_contiguous else None  # a reshape must be a view of it
    return _layer_norm_f32(x, weight, bias, len(tuple(normalized_shape)), eps, target)


def layer_norm_backward_into(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    out: np.ndarray | None,
    work: tuple[np.ndarray, ...],
    normalized_shape: Any,
    eps: float = 1e-5,
) -> np.ndarray:
    """The registered ``layer_norm_backward`` kernel's float32 path, bit for bit: the
    result in ``out`` (x's shape; may be g or x) or fresh, the centred x in ``work[0]``
    (x's shape, overlapping none of g, x, out). Only for float32 g, x (and weight)."""
    return _layer_norm_backward_f32(g, x, weight, len(tuple(normalized_shape)), eps, out, work[0])


# -- batch norm (training: batch statistics) --------------------------------------------
def _infer_batch_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    if len(x.shape) < 2:
        raise ShapeError(f"input must be (N, C, ...), got {x}")
    _check_affine(types, (x.shape[1],), "one value per channel")
    if float(attrs.get("eps", 1e-5)) <= 0:
        raise ShapeError(f"eps must be positive, got {attrs.get('eps')}")
    return x


def _infer_batch_norm_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types[0], types[1]
    if g.shape != x.shape:
        raise ShapeError(f"gradient {g} must have the shape of the input {x}")
    same_dtype([g, x], "gradient and input")
    if len(types) == 3:
        if types[2].shape != (x.shape[1],):
            raise ShapeError(f"weight is {types[2]}, expected shape [{x.shape[1]}]")
    elif len(types) != 2:
        raise ShapeError(f"takes (g, x) or (g, x, weight), got {len(types)} inputs")
    return _infer_batch_norm([x], attrs)


def _channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _batch_norm(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    eps: float = 1e-5,
) -> np.ndarray:
    y, _ = _normalize(x, batch_norm_axes(x.ndim), eps)
    if weight is not None and bias is not None:
        y = y * _channel(weight, x.ndim) + _channel(bias, x.ndim)
    return y


def _batch_norm_backward(
    g: np.ndarray, x: np.ndarray, weight: np.ndarray | None = None, *, eps: float = 1e-5
) -> np.ndarray:
    gw = g if weight is None else g * _channel(weight, x.ndim)
    return _normalize_backward(gw, x, batch_norm_axes(x.ndim), eps)


# -- dropout ----------------------------------------------------------------------------------
def pcg_hash(v: np.ndarray) -> np.ndarray:
    """The PCG-RXS-M-XS 32-bit hash (Jarzynski and Olano 2020) of uint32 values."""
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    out: np.ndarray = (word >> np.uint32(22)) ^ word
    return out


def dropout_key(seed: int) -> int:
    """The 32-bit key of a seed: pcg(lo ^ pcg(hi)) of its two's-complement int64 halves.

    For a seed in the int32 range, ``hi`` is 0 (seed >= 0) or 0xFFFFFFFF (seed < 0),
    so a backend holding the seed as an i32 computes the same key.
    """
    bits = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    lo, hi = np.array([bits & 0xFFFF_FFFF], np.uint32), np.array([bits >> 32], np.uint32)
    return int(pcg_hash(lo ^ pcg_hash(hi))[0])


def dropout_threshold(p: float) -> int:
    """An element is kept when its hash is >= floor(p * 2**32)."""
    return min(math.floor(p * 4294967296.0), 0xFFFF_FFFF)


def dropout_keep(shape: tuple[int, ...], seed: int, p: float) -> np.ndarray:
    """The keep mask: ``pcg(pcg(index) ^ key) >= threshold``, index in row-major order."""
    if p <= 0.0:
        return np.ones(shape, dtype=bool)
    if p >= 1.0:
        return np.zeros(shape, dtype=bool)
    index = np.arange(math.prod(shape), dtype=np.uint32)
    h = pcg_hash(pcg_hash(index) ^ np.uint32(dropout_key(seed)))
    return (h >= np.uint32(dropout_threshold(p))).reshape(shape)


def _infer_dropout(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, seed = types
    require_float(x)
    if not is_int(seed.dtype) or seed.shape != ():
        raise DTypeError(
            f"seed must be an int32/int64 scalar, got {seed}; feed one or hold it in a"
            " Variable that the training program advances"
        )
    p = float(attrs["p"])
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability p must be in [0, 1], got {p}")
    return x


def _dropout(x: np.ndarray, seed: np.ndarray, *, p: float) -> np.ndarray:
    if p >= 1.0:
        return np.zeros_like(x)
    keep = dropout_keep(x.shape, int(seed), p)
    scale = x.dtype.type(1.0 / (1.0 - p))
    return np.where(keep, x * scale, np.zeros((), x.dtype))


# -- cases ------------------------------------------------------------------------------------
def _layer_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5),), {"normalized_shape": (5,), "eps": 1e-5}, label="plain"),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 4), randn(rng, 4)),
            {"normalized_shape": (4,), "eps": 1e-5},
            label="affine",
        ),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 3, 4), randn(rng, 3, 4)),
            {"normalized_shape": (3, 4), "eps": 1e-3},
            label="two axes",
        ),
        OpCase(
            (randn(rng, 4, 64, scale=5.0) + 3.0,),
            {"normalized_shape": (64,), "eps": 1e-5},
            label="long rows, offset",
        ),
    ]


def _layer_norm_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5), randn(rng, 3, 5)), {"normalized_shape": (5,), "eps": 1e-5}),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), randn(rng, 4)),
            {"normalized_shape": (4,), "eps": 1e-5},
            label="weight",
        ),
        OpCase(
            (randn(rng, 2, 2, 3), randn(rng, 2, 2, 3), randn(rng, 2, 3)),
            {"normalized_shape": (2, 3), "eps": 1e-3},
            label="two axes",
        ),
    ]


def _batch_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 6, 3),), {"eps": 1e-5}, label="(N, C)"),
        OpCase(
            (randn(rng, 3, 2, 4), randn(rng, 2), randn(rng, 2)), {"eps": 1e-5}, label="(N, C, L)"
        ),
        OpCase(
            (randn(rng, 2, 3, 3, 2) * 2.0 + 1.0, randn(rng, 3), randn(rng, 3)),
            {"eps": 1e-3},
            label="(N, C, H, W)",
        ),
    ]


def _batch_norm_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 5, 3), randn(rng, 5, 3)), {"eps": 1e-5}, label="(N, C)"),
        OpCase(
            (randn(rng, 2, 3, 2, 2), randn(rng, 2, 3, 2, 2), randn(rng, 3)),
            {"eps": 1e-5},
            label="(N, C, H, W) weight",
        ),
    ]


def _dropout_cases(rng: np.random.Generator) -> list[OpCase]:
    seed = np.array(12345, dtype=np.int64)
    return [
        OpCase((randn(rng, 4, 6), seed), {"p": 0.5}, wrt=(0,), label="p=0.5"),
        OpCase((randn(rng, 2, 3, 5), np.array(-7, np.int64)), {"p": 0.2}, wrt=(0,), label="p=0.2"),
        OpCase((randn(rng, 3, 4), seed), {"p": 0.0}, wrt=(0,), label="p=0"),
        OpCase((randn(rng, 3, 4), seed), {"p": 1.0}, wrt=(0,), label="p=1"),
        OpCase(
            (randn(rng, 64, 65), np.array(2**40 + 3, np.int64)),
            {"p": 0.3},
            grad=False,
            label="large, 64-bit seed",
        ),
    ]


register_op(
    OpDef(
        "layer_norm",
        "norm",
        _infer_layer_norm,
        _layer_norm,
        None,
        True,
        _NORM_TOLERANCE,
        _layer_norm_cases,
        composite=True,
        doc="normalise the trailing normalized_shape axes, optional affine",
    )
)
register_op(
    OpDef(
        "layer_norm_backward",
        "norm",
        _infer_layer_norm_backward,
        _layer_norm_backward,
        None,
        True,
        _NORM_TOLERANCE,
        _layer_norm_backward_cases,
        composite=True,
        doc="layer_norm's input gradient from (g, x[, weight])",
    )
)
register_op(
    OpDef(
        "batch_norm",
        "norm",
        _infer_batch_norm,
        _batch_norm,
        None,
        True,
        _NORM_TOLERANCE,
        _batch_norm_cases,
        composite=True,
        doc="normalise each channel (axis 1) by batch statistics, optional affine",
    )
)
register_op(
    OpDef(
        "batch_norm_backward",
        "norm",
        _infer_batch_norm_backward,
        _batch_norm_backward,
        None,
        True,
        _NORM_TOLERANCE,
        _batch_norm_backward_cases,
        composite=True,
        doc="batch_norm's input gradient from (g, x[, weight])",
    )
)
register_op(
    OpDef(
        "dropout",
        "random",
        _infer_dropout,
        _dropout,
        2,
        True,
        (1e-6, 1e-7),
        _dropout_cases,
        doc="zero elements with probability p by a hash of (seed, index); scale 1/(1-p)",
    )
)
