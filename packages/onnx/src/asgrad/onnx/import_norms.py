"""ONNX's other normalisations, depth/space rearrangements and generated tensors, each
composed from asgrad ops (its gradient follows from the parts).

``RMSNormalization``, ``LpNormalization``, ``InstanceNormalization``,
``GroupNormalization`` and ``MeanVarianceNormalization`` reduce with asgrad's means
and sums; ``DepthToSpace`` and ``SpaceToDepth`` are a reshape, a transpose and a
reshape; ``EyeLike`` is a constant; ``OneHot`` compares indices with a range;
``CumProd`` reverses and shifts asgrad's ``cumprod``; ``NegativeLogLikelihoodLoss`` and
``SoftmaxCrossEntropyLoss`` pick the targets' log-probabilities along the class axis.
"""

from __future__ import annotations

import numpy as np
import onnx

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, concat, pad, scan, where

__all__ = ["NORM_IMPORTERS"]


def _moments(x: Tensor, axes: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Mean and population variance over ``axes``, kept as size-1 axes."""
    mean = x.mean(axes, keepdims=True)
    centred = x - mean
    return mean, (centred * centred).mean(axes, keepdims=True)


def _rms_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axes = tuple(range(int(a.get("axis", -1)) % rank, rank))
    eps = float(a.get("epsilon", 1e-5))
    y = x / ((x * x).mean(axes, keepdims=True) + eps).sqrt()
    return [y * ctx.tensor(xs[1])]


def _lp_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    axis = int(a.get("axis", -1)) % len(x.shape)
    p = int(a.get("p", 2))
    if p == 1:
        norm = x.abs().sum(axis, keepdims=True)
    elif p == 2:
        norm = (x * x).sum(axis, keepdims=True).sqrt()
    else:
        raise OnnxImportError(f"LpNormalization with p={p}; ONNX allows 1 or 2")
    zero = ctx.graph.constant(0, dtype=x.dtype)
    safe = where(norm == zero, ctx.graph.constant(1, dtype=x.dtype), norm)
    return [where(norm == zero, zero, x / safe)]


def _per_channel(t: Tensor, rank: int) -> Tensor:
    return t.reshape((-1, *([1] * (rank - 2))))


def _instance_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    eps = float(attributes(node).get("epsilon", 1e-5))
    mean, var = _moments(x, tuple(range(2, rank)))
    y = (x - mean) / (var + eps).sqrt()
    scale, bias = ctx.tensor(xs[1]), ctx.tensor(xs[2])
    return [y * _per_channel(scale, rank) + _per_channel(bias, rank)]


def _group_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    n, c = x.shape[0], x.shape[1]
    groups = int(a["num_groups"])
    if c % groups:
        raise OnnxImportError(f"GroupNormalization: {c} channels do not split in {groups} groups")
    eps = float(a.get("epsilon", 1e-5))
    grouped = x.reshape((n, groups, -1))
    mean, var = _moments(grouped, (2,))
    y = ((grouped - mean) / (var + eps).sqrt()).reshape(x.shape)
    scale, bias = ctx.tensor(xs[1]), ctx.tensor(xs[2])
    if scale.shape[0] != c:  # opset 18: one scale and bias per group
        per = c // groups
        scale = scale.reshape((groups, 1)).broadcast_to((groups, per)).reshape((c,))
        bias = bias.reshape((groups, 1)).broadcast_to((groups, per)).reshape((c,))
    return [y * _per_channel(scale, rank) + _per_channel(bias, rank)]


def _mean_variance_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axes = tuple(int(v) % rank for v in attributes(node).get("axes", [0, 2, 3]))
    mean, var = _moments(x, axes)
    return [(x - mean) / (var.sqrt() + 1e-9)]


def _lrn(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``x / (bias + alpha / size * sum of x^2 over a window of channels)^beta``."""
    a = attributes(node)
    x = ctx.tensor(xs[0])
    size = int(a["size"])
    alpha, beta = float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75))
    bias = float(a.get("bias", 1.0))
    channels = x.shape[1]
    pairs = [(0, 0)] * len(x.shape)
    pairs[1] = ((size - 1) // 2, size - 1 - (size - 1) // 2)
    padded = pad(x * x, tuple(pairs))
    total = padded[:, 0:channels]
    for i in range(1, size):
        total = total + padded[:, i : i + channels]
    return [x / (total * (alpha / size) + bias) ** beta]


def _rotary_embedding(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """RoPE as ONNX defines it: the first ``rotary_embedding_dim`` features of each head
    rotated by the cached angles of each position (halves, or interleaved pairs)."""
    a = attributes(node)
    x = ctx.tensor(xs[0])
    original = x.shape
    if len(original) == 4:  # (batch, heads, seq, head) -> (batch, seq, heads, head)
        x = x.transpose((0, 2, 1, 3))
    elif len(original) == 3:
        heads = int(a.get("num_heads", 0))
        if not heads:
            raise OnnxImportError("RotaryEmbedding of a rank-3 input needs num_heads")
        x = x.reshape((original[0], original[1], heads, original[2] // heads))
    else:
        raise OnnxImportError(f"RotaryEmbedding of a rank-{len(original)} input")
    head = x.shape[3]
    dim = int(a.get("rotary_embedding_dim", 0)) or head
    cos, sin = ctx.tensor(xs[1]), ctx.tensor(xs[2])
    if len(xs) > 3 and node.input[3]:
        ids = ctx.tensor(xs[3])
        cos = ctx.graph.apply("gather", [cos, ids], {"axis": 0})
        sin = ctx.graph.apply("gather", [sin, ids], {"axis": 0})
    cos, sin = cos.expand_dims(2), sin.expand_dims(2)
    rotate = x[..., :dim]
    if a.get("interleaved", 0):
        x1, x2 = rotate[..., 0::2], rotate[..., 1::2]
    else:
        x1, x2 = rotate[..., : dim // 2], rotate[..., dim // 2 :]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if a.get("interleaved", 0):
        rotated = concat([real.expand_dims(-1), imag.expand_dims(-1)], -1).reshape(
            (*real.shape[:3], dim)
        )
    else:
        rotated = concat([real, imag], -1)
    y = concat([rotated, x[..., dim:]], -1) if dim < head else rotated
    if len(original) == 4:
        return [y.transpose((0, 2, 1, 3))]
    return [y.reshape(original)]


def _depth_to_space(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    if len(x.shape) != 4:
        raise OnnxImportError(f"DepthToSpace on a rank-{len(x.shape)} input; ONNX needs NCHW")
    n, c, h, w = x.shape
    b = int(a["blocksize"])
    if a.get("mode", "DCR") == "DCR":
        y = x.reshape((n, b, b, c // (b * b), h, w)).transpose((0, 3, 4, 1, 5, 2))
    else:  # CRD
        y = x.reshape((n, c // (b * b), b, b, h, w)).transpose((0, 1, 4, 2, 5, 3))
    return [y.reshape((n, c // (b * b), h * b, w * b))]


def _space_to_depth(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    if len(x.shape) != 4:
        raise OnnxImportError(f"SpaceToDepth on a rank-{len(x.shape)} input; ONNX needs NCHW")
    n, c, h, w = x.shape
    a = attributes(node)
    b = int(a["blocksize"])
    perm = (0, 3, 5, 1, 2, 4) if a.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = x.reshape((n, c, h // b, b, w // b, b)).transpose(perm)
    return [y.reshape((n, c * b * b, h // b, w // b))]


def _eye_like(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = xs[0]
    shape = x.value.shape if isinstance(x, Static) else x.shape
    dtype = x.value.dtype.name if isinstance(x, Static) else x.dtype
    if "dtype" in a:
        if a["dtype"] not in ONNX_TO_DTYPE:
            raise OnnxImportError(f"EyeLike to ONNX type {a['dtype']}, which asgrad does not have")
        dtype = ONNX_TO_DTYPE[a["dtype"]]
    if len(shape) != 2:
        raise OnnxImportError(f"EyeLike of a rank-{len(shape)} input; ONNX needs rank 2")
    return [Static(np.eye(shape[0], shape[1], k=int(a.get("k", 0)), dtype=dtype))]


def _one_hot(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    indices = ctx.tensor(xs[0])
    depth = int(ctx.static(xs[1], "OneHot's depth").reshape(-1)[0])
    values = ctx.tensor(xs[2])
    rank = len(indices.shape) + 1
    axis = int(attributes(node).get("axis", -1))
    if not -rank <= axis < rank:
        raise OnnxImportError(f"OneHot's axis {axis} is outside a rank-{rank} output")
    axis %= rank
    if indices.dtype != "int64":
        indices = indices.cast("int64")
    zero = ctx.graph.constant(0, dtype="int64")
    indices = where(indices < zero, indices + ctx.graph.constant(depth, dtype="int64"), indices)
    classes = ctx.graph.constant(np.arange(depth, dtype=np.int64), dtype="int64")
    hot = indices.expand_dims(-1) == classes
    off, on = values[0], values[1]
    y = where(hot, on, off)
    return [y if axis == rank - 1 else y.movedim(rank - 1, axis)]


def _cumprod(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axis = int(ctx.static(xs[1], "CumProd's axis").reshape(-1)[0]) % rank
    reverse = bool(a.get("reverse", 0))
    source = x.flip(axis) if reverse else x
    if a.get("exclusive", 0):  # the product of the entries before: shift in a one
        shape = list(x.shape)
        shape[axis] = 1
        ones = ctx.graph.constant(np.ones(shape, dtype=x.dtype), dtype=x.dtype)
        before = (slice(None),) * axis
        source = concat([ones, source[(*before, slice(0, x.shape[axis] - 1))]], axis)
    if x.dtype in ("float32", "float64"):
        y = source.cumprod(axis)
    else:  # asgrad's cumprod is for floats: integers multiply in a scan (wrapping as C)
        steps = source.movedim(axis, 0) if axis else source
        ones = ctx.graph.constant(np.ones(steps.shape[1:], dtype=x.dtype), dtype=x.dtype)
        _, stacked = scan(lambda c, v: (c * v, c * v), ones, steps)
        y = stacked.movedim(0, axis) if axis else stacked
    return [y.flip(axis) if reverse else y]


def _nll(ctx: ImportContext, node: onnx.NodeProto, log_prob: Tensor, xs: list[Value]) -> Tensor:
    """ONNX's negative log-likelihood of ``log_prob`` (N, C, ...) at the targets ``xs[1]``:
    per-class ``weight`` (``xs[2]``), ``ignore_index``, ``reduction`` none, sum or mean
    (the sum over the sum of the weights used)."""
    a = attributes(node)
    target = ctx.tensor(xs[1])
    if target.dtype != "int64":
        target = target.cast("int64")
    ignore = a.get("ignore_index")
    zero = ctx.graph.constant(0, dtype="int64")
    keep = None if ignore is None else target != ctx.graph.constant(int(ignore), dtype="int64")
    safe = target if keep is None else where(keep, target, zero)
    picked = log_prob.take_along_axis(safe.expand_dims(1), 1).squeeze(1)
    if len(xs) > 2 and node.input[2]:
        weight = ctx.graph.apply("gather", [ctx.tensor(xs[2]), safe], {"axis": 0})
    else:
        weight = (picked * 0.0) + 1.0
    if keep is not None:
        weight = where(keep, weight, ctx.graph.constant(0, dtype=weight.dtype))
    loss = -(picked * weight)
    reduction = str(a.get("reduction", "mean"))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum()
    raise OnnxImportError(f"{node.op_type} with reduction={reduction!r} is not supported")


def _nll_loss(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    return [_nll(ctx, node, ctx.tensor(xs[0]), xs)]


def _softmax_cross_entropy(
    ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]
) -> list[Value]:
    log_prob = ctx.graph.apply("log_softmax", [ctx.tensor(xs[0])], {"axis": 1})
    return [_nll(ctx, node, log_prob, xs), log_prob]


NORM_IMPORTERS: dict[str, Importer] = {
    "RMSNormalization": _rms_norm,
    "LpNormalization": _lp_norm,
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm,
    "MeanVarianceNormalization": _mean_variance_norm,
    "LRN": _lrn,
    "RotaryEmbedding": _rotary_embedding,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
    "EyeLike": _eye_like,
    "OneHot": _one_hot,
    "CumProd": _cumprod,
    "NegativeLogLikelihoodLoss": _nll_loss,
    "SoftmaxCrossEntropyLoss": _softmax_cross_entropy,
}
"""The importers of this module, by ONNX op type."""
