"""ONNX's ``ai.onnx.ml`` ``Binarizer`` and ``ArrayFeatureExtractor``, and the
``ai.onnx.preview.training`` optimiser steps ``Adagrad``, ``Momentum`` and ``Adam``.

The optimiser steps read their learning rate ``R`` and update count ``T`` at load time
(give them as constants when they are model inputs); each step is the formula of
ONNX's definition on asgrad's elementwise ops.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, where

__all__ = ["DOMAIN_OPS", "ML_IMPORTERS"]

# The op types imported from domains other than ONNX's default one.
DOMAIN_OPS = {
    "ai.onnx.ml": frozenset({"Binarizer", "ArrayFeatureExtractor"}),
    "ai.onnx.preview.training": frozenset({"Adagrad", "Momentum", "Adam"}),
}


def _binarizer(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """1 where ``X > threshold``, else 0, in ``X``'s dtype."""
    x = ctx.tensor(xs[0])
    threshold = float(attributes(node).get("threshold", 0.0))
    one = x.graph.constant(1, dtype=x.dtype)
    zero = x.graph.constant(0, dtype=x.dtype)
    return [where(x > x.graph.constant(threshold, dtype=x.dtype), one, zero)]


def _array_feature_extractor(
    ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]
) -> list[Value]:
    """The entries of ``X``'s last axis at ``Y``'s (flattened) indices; a 1-D ``X``
    gives one row."""
    x = ctx.tensor(xs[0])
    indices = ctx.static(xs[1], "ArrayFeatureExtractor's indices").astype(np.int64).ravel()
    size = x.shape[-1]
    if np.any(indices < 0) or np.any(indices >= size):
        raise OnnxImportError(f"ArrayFeatureExtractor's indices {indices} are outside [0, {size})")
    taken = ctx.tensor(Static(indices))
    y = ctx.graph.apply("gather", [x, taken], {"axis": len(x.shape) - 1})
    if len(x.shape) == 1:
        y = ctx.graph.apply("reshape", [y], {"shape": (1, len(indices))})
    return [y]


def _step_inputs(
    ctx: ImportContext, node: onnx.NodeProto, xs: list[Value], groups: int
) -> tuple[float, int, list[list[Tensor]]]:
    """The learning rate, the update count and ``groups`` lists of tensors (X, G, ...)."""
    rate = ctx.static(xs[0], f"{node.op_type}'s learning rate R")
    count = ctx.static(xs[1], f"{node.op_type}'s update count T")
    if rate.size != 1 or count.size != 1:
        raise OnnxImportError(f"{node.op_type}'s R and T must be scalars")
    rest = xs[2:]
    if len(rest) % groups:
        raise OnnxImportError(f"{node.op_type} needs {groups} inputs per optimised tensor")
    n = len(rest) // groups
    tensors = [[ctx.tensor(v) for v in rest[i * n : (i + 1) * n]] for i in range(groups)]
    for group in tensors[1:]:
        for x, other in zip(tensors[0], group, strict=True):
            if tuple(other.shape) != tuple(x.shape):
                raise OnnxImportError(f"{node.op_type}'s inputs for one tensor differ in shape")
    return float(rate.reshape(())), int(count.reshape(())), tensors


def _adagrad(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``X - r G' / (sqrt(H + G'^2) + epsilon)`` with ``G' = G + norm_coefficient X`` and
    ``r = R / (1 + T decay_factor)``; also the new ``H``."""
    a = attributes(node)
    rate, count, (params, grads, sums) = _step_inputs(ctx, node, xs, 3)
    decay = float(a.get("decay_factor", 0.0))
    eps, norm = float(a.get("epsilon", 0.0)), float(a.get("norm_coefficient", 0.0))
    r = rate / (1 + count * decay)
    new_x, new_h = [], []
    for x, g, h in zip(params, grads, sums, strict=True):
        g_reg = x * norm + g
        h_new = h + g_reg * g_reg
        new_x.append(x - g_reg * r / (h_new.sqrt() + eps))
        new_h.append(h_new)
    return [*new_x, *new_h]


def _momentum(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``V' = alpha V + beta G'`` (``beta`` 1 at the first update, ``T = 0``), then
    ``X - R V'`` (standard) or ``X - R (G' + alpha V')`` (nesterov); also ``V'``."""
    a = attributes(node)
    rate, count, (params, grads, moments) = _step_inputs(ctx, node, xs, 3)
    alpha, beta = float(a["alpha"]), float(a["beta"]) if count > 0 else 1.0
    norm = float(a["norm_coefficient"])
    mode = a.get("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise OnnxImportError(f"Momentum's mode {mode!r} is not 'standard' or 'nesterov'")
    new_x, new_v = [], []
    for x, g, v in zip(params, grads, moments, strict=True):
        g_reg = x * norm + g
        v_new = v * alpha + g_reg * beta
        step = v_new if mode == "standard" else g_reg + v_new * alpha
        new_x.append(x - step * rate)
        new_v.append(v_new)
    return [*new_x, *new_v]


def _adam(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """ONNX's Adam step: the moments ``V``, ``H`` updated, then ``X`` by the learning rate
    bias-corrected for ``T > 0``, scaled by ``1 - norm_coefficient_post``."""
    a = attributes(node)
    rate, count, (params, grads, firsts, seconds) = _step_inputs(ctx, node, xs, 4)
    alpha, beta = float(a.get("alpha", 0.9)), float(a.get("beta", 0.999))
    eps = float(a.get("epsilon", 1e-6))
    norm, post = float(a.get("norm_coefficient", 0.0)), float(a.get("norm_coefficient_post", 0.0))
    r = rate * math.sqrt(1 - beta**count) / (1 - alpha**count) if count > 0 else rate
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(params, grads, firsts, seconds, strict=True):
        g_reg = x * norm + g
        v_new = v * alpha + g_reg * (1 - alpha)
        h_new = h * beta + g_reg * g_reg * (1 - beta)
        x_new = x - v_new / (h_new.sqrt() + eps) * r
        new_x.append(x_new * (1 - post))
        new_v.append(v_new)
        new_h.append(h_new)
    return [*new_x, *new_v, *new_h]


ML_IMPORTERS: dict[str, Importer] = {
    "Binarizer": _binarizer,
    "ArrayFeatureExtractor": _array_feature_extractor,
    "Adagrad": _adagrad,
    "Momentum": _momentum,
    "Adam": _adam,
}
