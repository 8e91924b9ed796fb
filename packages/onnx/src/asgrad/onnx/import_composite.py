"""ONNX ops that asgrad has no primitive for, built from asgrad ops.

Activations (``HardSigmoid``, ``HardSwish``, ``Selu``, ``Mish``, ``PRelu``,
``Reciprocal``), the variadic ``Mean``, and ``Split`` and ``Tile`` with sizes known at
load time, each as a composition whose gradient follows from its parts.
"""

from __future__ import annotations

import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Value, attributes
from asgrad.tensor import Tensor

__all__ = ["COMPOSITE_IMPORTERS"]


def _hard_sigmoid_of(ctx: ImportContext, x: Tensor, alpha: float, beta: float) -> Tensor:
    return ctx.graph.apply("clamp", [x * alpha + beta], {"min": 0.0, "max": 1.0})


def _hard_sigmoid(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    return [_hard_sigmoid_of(ctx, ctx.tensor(xs[0]), alpha, beta)]


def _hard_swish(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    return [x * _hard_sigmoid_of(ctx, x, 1.0 / 6.0, 0.5)]


def _selu(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    alpha = float(a.get("alpha", 1.67326319217681884765625))
    gamma = float(a.get("gamma", 1.05070102214813232421875))
    return [ctx.graph.apply("elu", [ctx.tensor(xs[0])], {"alpha": alpha}) * gamma]


def _mish(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    return [x * ctx.graph.apply("softplus", [x], {"beta": 1.0}).tanh()]


def _prelu(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x, slope = ctx.tensor(xs[0]), ctx.tensor(xs[1])
    positive = ctx.graph.apply("greater", [x, x * 0.0], {})
    return [ctx.graph.apply("where", [positive, x, x * slope], {})]


def _reciprocal(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    one = ctx.graph.constant(1.0, dtype=x.dtype)
    return [ctx.graph.apply("div", [one, x], {})]


def _mean(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    total = ctx.tensor(xs[0])
    for x in xs[1:]:
        total = total + ctx.tensor(x)
    return [total * (1.0 / len(xs))]


def _split(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    axis = int(a.get("axis", 0)) % len(x.shape)
    size = x.shape[axis]
    if len(xs) > 1 and node.input[1]:
        sizes = [int(s) for s in ctx.static(xs[1], "Split's sizes").reshape(-1)]
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    else:
        parts = int(a.get("num_outputs", len(node.output)))
        chunk = -(-size // parts)
        sizes = [min(chunk, size - i * chunk) for i in range(parts)]
    if sum(sizes) != size or len(sizes) != len(node.output):
        raise OnnxImportError(f"Split sizes {sizes} do not cover axis {axis} of size {size}")
    outs: list[Value] = []
    start = 0
    for s in sizes:
        index = (*([slice(None)] * axis), slice(start, start + s))
        outs.append(ctx.graph.apply("slice", [x], {"index": index}))
        start += s
    return outs


def _tile(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    repeats = [int(r) for r in ctx.static(xs[1], "Tile's repeats").reshape(-1)]
    for axis, r in enumerate(repeats):
        if r != 1:
            x = ctx.graph.apply("concat", [x] * r, {"axis": axis})
    return [x]


COMPOSITE_IMPORTERS: dict[str, Importer] = {
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Selu": _selu,
    "Mish": _mish,
    "PRelu": _prelu,
    "Reciprocal": _reciprocal,
    "Mean": _mean,
    "Split": _split,
    "Tile": _tile,
}
