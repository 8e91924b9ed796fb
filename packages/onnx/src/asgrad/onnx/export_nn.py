"""How each conv, pool, norm, random and optim op is written in ONNX.

Batch norm (by batch statistics) and adaptive average pooling have no single ONNX
op of the same meaning and are decomposed: the first into reductions and
elementwise ops, the second into two matrix products with averaging matrices
(PyTorch's window bounds). Dropout with ``p > 0`` draws a new mask per run and has
no inference form: it is refused, with the fix (trace the model in eval mode).
"""

from __future__ import annotations

import numpy as np

from asgrad.onnx.builder import OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.onnx.export_ops import Exporter
from asgrad.tensor import Node
from asgrad.tensor.ops.conv import conv_attrs
from asgrad.tensor.ops.pool import adaptive_output_size
from asgrad.tensor.ops.spatial import pair, window_attrs

__all__ = ["NN_EXPORTERS", "NOT_EXPORTED", "averaging_matrix"]


def _conv2d(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    stride, padding, dilation, groups = conv_attrs(node.attrs)
    kernel = list(node.inputs[1].shape[2:])
    return b.op(
        "Conv",
        xs,
        kernel_shape=kernel,
        strides=list(stride),
        pads=[*padding, *padding],
        dilations=list(dilation),
        group=groups,
    )


def _conv_transpose2d(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    stride, padding, dilation, groups = conv_attrs(node.attrs)
    output_padding = pair(node.attrs["output_padding"], "output_padding")
    kernel = list(node.inputs[1].shape[2:])
    return b.op(
        "ConvTranspose",
        xs,
        kernel_shape=kernel,
        strides=list(stride),
        pads=[*padding, *padding],
        dilations=list(dilation),
        group=groups,
        output_padding=list(output_padding),
    )


def _max_pool2d(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    kernel, stride, padding = window_attrs(node.attrs)
    return b.op(
        "MaxPool", xs, kernel_shape=list(kernel), strides=list(stride), pads=[*padding, *padding]
    )


def _avg_pool2d(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    kernel, stride, padding = window_attrs(node.attrs)
    return b.op(
        "AveragePool",
        xs,
        kernel_shape=list(kernel),
        strides=list(stride),
        pads=[*padding, *padding],
        count_include_pad=int(node.attrs["count_include_pad"]),
    )


def averaging_matrix(size: int, out: int) -> np.ndarray:
    """``(out, size)``: row ``i`` averages PyTorch's adaptive window ``i`` of ``size``."""
    m = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def _adaptive_avg_pool2d(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``A_h @ x @ A_w.T``: exact window means, any input size."""
    h, w = node.inputs[0].shape[2:]
    oh, ow = adaptive_output_size(node.attrs)
    rows = b.const(averaging_matrix(h, oh), node.dtype, "pool_rows")
    cols = b.const(averaging_matrix(w, ow).T, node.dtype, "pool_cols")
    return b.op("MatMul", [b.op("MatMul", [rows, xs[0]]), cols])


def _softmax(op_type: str) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        return b.op(op_type, xs, axis=int(node.attrs["axis"]) % len(node.shape))

    return export


def _layer_norm(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    normalized = tuple(int(d) for d in node.attrs["normalized_shape"])
    inputs = list(xs)
    if len(inputs) == 1:  # no affine part: ONNX wants a scale
        inputs.append(b.const(np.ones(normalized), node.dtype, "ones"))
    return b.op(
        "LayerNormalization",
        inputs,
        axis=-len(normalized),
        epsilon=float(node.attrs["eps"]),
    )


def _batch_norm(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``(x - mean) / sqrt(var + eps)`` over every axis but 1, then the affine part."""
    ndim = len(node.shape)
    axes = [0, *range(2, ndim)]
    mean = b.reduce("ReduceMean", xs[0], axes, True)
    centred = b.op("Sub", [xs[0], mean])
    var = b.reduce("ReduceMean", b.op("Mul", [centred, centred]), axes, True)
    eps = b.scalar(float(node.attrs["eps"]), node)
    y = b.op("Div", [centred, b.op("Sqrt", [b.op("Add", [var, eps])])])
    if len(xs) == 3:
        channel = b.ints([-1, *([1] * (ndim - 2))], "channel_shape")
        y = b.op("Mul", [y, b.op("Reshape", [xs[1], channel])])
        y = b.op("Add", [y, b.op("Reshape", [xs[2], channel])])
    return y


def _dropout(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    if float(node.attrs["p"]) == 0.0:
        return b.op("Identity", xs[:1])
    raise OnnxExportError(
        f"dropout (p={node.attrs['p']}) draws a new mask each run and has no inference form"
        " in ONNX; trace the model in eval mode (model.eval()) before exporting",
        op=node.op,
        location=node.location,
    )


def _adam_ema(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    beta = float(node.attrs["beta"])
    m, g = xs
    if node.attrs["square"]:
        g = b.op("Mul", [g, g])
    kept = b.op("Mul", [m, b.scalar(beta, node)])
    return b.op("Add", [kept, b.op("Mul", [g, b.scalar(1.0 - beta, node)])])


def _adam_update(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps)``."""
    p, m, v, step_size, bc2_sqrt = xs[:5]
    eps = b.scalar(float(node.attrs["eps"]), node)
    denom = b.op("Add", [b.op("Div", [b.op("Sqrt", [v]), bc2_sqrt]), eps])
    step = b.op("Div", [b.op("Mul", [step_size, m]), denom])
    kept = b.op("Mul", [p, xs[5]]) if len(xs) == 6 else p
    return b.op("Sub", [kept, step])


NN_EXPORTERS: dict[str, Exporter] = {
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    "layer_norm": _layer_norm,
    "batch_norm": _batch_norm,
    "dropout": _dropout,
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
}

# Ops with no ONNX form, and why (the export error says it). Ops missing from both
# tables (new ops) are refused too, as having no exporter yet.
_GRADIENT_OPS = (
    "adaptive_avg_pool2d_backward",
    "avg_pool2d_backward",
    "batch_norm_backward",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "gelu_backward",
    "layer_norm_backward",
    "max_pool2d_backward",
    "max_pool2d_select",
    "scatter_add",
    "scatter_slice",
)
NOT_EXPORTED: dict[str, str] = {
    **dict.fromkeys(
        _GRADIENT_OPS,
        "a gradient op: export the forward (inference) graph, differentiate after load",
    ),
    **dict.fromkeys(
        ("left_shift", "right_shift"),
        "ONNX's BitShift takes unsigned integers only, and asgrad's shifts are signed",
    ),
}
