"""How ONNX's matrix, conv, pool, norm and reduction ops become asgrad ops.

``Conv`` is two-dimensional (NCHW) with symmetric padding, as asgrad's;
``ConvTranspose`` is 1-D to 3-D (asgrad's unpadded op, cropped to ONNX's pads), and the
pools too (asgrad's 2-D op where it applies, else strided slices of the padded input).
Another form is refused with the reason. ``BatchNormalization`` is the
inference form: the running statistics (loaded as variables that are not trained)
normalise each channel.
"""

from __future__ import annotations

import numpy as np
import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, floor_divide, pad, remainder

__all__ = ["NN_IMPORTERS"]


def _matmul(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """numpy's matmul: a 1-D operand gains an axis for the product, then loses it."""
    a, b = ctx.tensor(xs[0]), ctx.tensor(xs[1])
    a_vector, b_vector = len(a.shape) == 1, len(b.shape) == 1
    if a_vector:
        a = a.expand_dims(0)
    if b_vector:
        b = b.expand_dims(-1)
    y = ctx.graph.apply("matmul", [a, b], {})
    if b_vector:
        y = y.squeeze(-1)
    if a_vector:
        y = y.squeeze(-2 if len(y.shape) > 1 else -1)
    return [y]


def _gemm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``alpha * A' @ B' + beta * C``, with ``'`` the optional transposes."""
    a = attributes(node)
    x, w = ctx.tensor(xs[0]), ctx.tensor(xs[1])
    if a.get("transA", 0):
        x = ctx.graph.apply("transpose", [x], {"axes": (1, 0)})
    if a.get("transB", 0):
        w = ctx.graph.apply("transpose", [w], {"axes": (1, 0)})
    y = ctx.graph.apply("matmul", [x, w], {})
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if len(xs) > 2 and node.input[2]:
        c = ctx.tensor(xs[2])
        y = y + (c * beta if beta != 1.0 else c)
    return [y]


def _pair(values: object, name: str, default: int) -> tuple[int, int]:
    items = [default, default] if values is None else [int(v) for v in values]  # type: ignore[attr-defined]  # an ONNX ints attribute
    if len(items) != 2:
        raise OnnxImportError(f"{name} {items} is not two-dimensional; asgrad has 2-D ops only")
    return items[0], items[1]


def _same_pads(
    a: dict[str, object], op: str, spatial: tuple[int, ...], kernel: tuple[int, ...]
) -> list[int]:
    """ONNX's ``SAME_UPPER``/``SAME_LOWER`` pads (begins then ends): the output size is
    ``ceil(input / stride)``; the odd unit of padding goes at the end (upper) or start."""
    strides = _pair(a.get("strides"), "strides", 1)
    dilations = _pair(a.get("dilations"), "dilations", 1)
    begins, ends = [], []
    for n, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small, large = total // 2, total - total // 2
        upper = a.get("auto_pad") == "SAME_UPPER"
        begins.append(small if upper else large)
        ends.append(large if upper else small)
    return [*begins, *ends]


def _pads(
    a: dict[str, object],
    op: str,
    spatial: tuple[int, ...] = (),
    kernel: tuple[int, ...] = (),
) -> tuple[int, int]:
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER") and spatial and kernel:
        pads = _same_pads(a, op, spatial, kernel)
    elif auto not in ("NOTSET", "VALID"):
        raise OnnxImportError(f"{op} with auto_pad={auto} is not supported; give explicit pads")
    else:
        pads = [0, 0, 0, 0] if auto == "VALID" or a.get("pads") is None else list(a["pads"])  # type: ignore[call-overload]  # an ints attribute
    if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
        raise OnnxImportError(
            f"{op} pads {pads} are not symmetric 2-D pads; asgrad pads both sides equally"
        )
    return int(pads[0]), int(pads[1])


def _check_2d(x: Tensor, op: str) -> None:
    if len(x.shape) != 4:
        raise OnnxImportError(f"{op} on a rank-{len(x.shape)} input; asgrad has 2-D (NCHW) only")


def _weight_kernel(w: Value, transposed: bool) -> tuple[int, ...]:
    """The kernel size of a convolution's weight (none for a transposed one: its
    ``SAME`` pads follow other rules)."""
    if transposed:
        return ()
    shape = w.value.shape if isinstance(w, Static) else w.shape
    return tuple(shape[2:])


def _ints(values: object, rank: int, name: str, default: int) -> list[int]:
    items = [default] * rank if values is None else [int(v) for v in values]  # type: ignore[attr-defined]  # an ONNX ints attribute
    if len(items) != rank:
        raise OnnxImportError(f"{name} {items} has not {rank} entries, one per spatial axis")
    return items


def _spatial_attr(items: list[int]) -> object:
    """An asgrad conv attribute: an int (1-D) or a tuple (2-D, 3-D)."""
    return items[0] if len(items) == 1 else tuple(items)


def _conv_transpose_window(
    a: dict[str, object], x: Tensor, kernel: tuple[int, ...]
) -> tuple[list[int], list[int], list[int]]:
    """Where ONNX's transposed convolution takes its output from the unpadded one (of
    length ``stride (n - 1) + dilated kernel``): the begins, the lengths and the
    positions added at the end (zeros and the bias), following ONNX's reference."""
    rank = len(kernel)
    strides = _ints(a.get("strides"), rank, "strides", 1)
    dilations = _ints(a.get("dilations"), rank, "dilations", 1)
    extra = _ints(a.get("output_padding"), rank, "output_padding", 0)
    spatial = x.shape[2:]
    full = [
        s * (n - 1) + (k - 1) * d + 1
        for n, k, s, d in zip(spatial, kernel, strides, dilations, strict=True)
    ]
    auto = a.get("auto_pad", "NOTSET")
    shape = a.get("output_shape")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if a.get("pads") is not None:
            raise OnnxImportError(f"ConvTranspose with auto_pad={auto} and pads")
        outs = (
            _ints(shape, rank, "output_shape", 0)
            if shape is not None
            else [n * s for n, s in zip(spatial, strides, strict=True)]
        )
        totals = [f + e - o for f, e, o in zip(full, extra, outs, strict=True)]
        begins = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in totals]
    elif auto not in ("NOTSET", "VALID"):
        raise OnnxImportError(f"ConvTranspose with auto_pad={auto} is not supported")
    elif shape is not None:
        if a.get("pads") is not None:
            raise OnnxImportError("ConvTranspose with both output_shape and pads is not supported")
        outs, begins = _ints(shape, rank, "output_shape", 0), [0] * rank
    else:
        pads = _ints(a.get("pads") if auto == "NOTSET" else None, 2 * rank, "pads", 0)
        begins = pads[:rank]
        outs = [f + e - b - p for f, e, b, p in zip(full, extra, begins, pads[rank:], strict=True)]
    if min(begins) < 0 or min(outs) <= 0:
        raise OnnxImportError(f"ConvTranspose's output {outs} from {begins} is not supported")
    added = [max(b + o - f, 0) for b, o, f in zip(begins, outs, full, strict=True)]
    return begins, outs, added


def _conv_transpose(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """ONNX's ``ConvTranspose`` in 1, 2 or 3 spatial dimensions: asgrad's unpadded
    transposed convolution, with positions added at the end (as its
    ``output_padding``) and cropped to ONNX's pads or output shape."""
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape) - 2
    if rank not in (1, 2, 3):
        raise OnnxImportError(
            f"ConvTranspose on a rank-{len(x.shape)} input; asgrad has 1-D to 3-D"
        )
    w = ctx.tensor(xs[1])
    kernel = tuple(w.shape[2:])
    if a.get("kernel_shape") is not None and tuple(int(k) for k in a["kernel_shape"]) != kernel:
        raise OnnxImportError(f"ConvTranspose's kernel_shape differs from the weight's {kernel}")
    begins, outs, added = _conv_transpose_window(a, x, kernel)
    attrs: dict[str, object] = {
        "stride": _spatial_attr(_ints(a.get("strides"), rank, "strides", 1)),
        "padding": _spatial_attr([0] * rank),
        "dilation": _spatial_attr(_ints(a.get("dilations"), rank, "dilations", 1)),
        "groups": int(a.get("group", 1)),
        "output_padding": _spatial_attr(added),
    }
    inputs = [x, w, *(ctx.tensor(v) for v, n in zip(xs[2:], node.input[2:], strict=True) if n)]
    op = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")[rank - 1]
    y = ctx.graph.apply(op, inputs, attrs)
    if any(b or o != n for b, o, n in zip(begins, outs, y.shape[2:], strict=True)):
        window = tuple(slice(b, b + o) for b, o in zip(begins, outs, strict=True))
        y = y[(slice(None), slice(None), *window)]
    return [y]


def _conv(transposed: bool) -> Importer:
    op_type = "ConvTranspose" if transposed else "Conv"

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a = attributes(node)
        x = ctx.tensor(xs[0])
        _check_2d(x, op_type)
        attrs: dict[str, object] = {
            "stride": _pair(a.get("strides"), "strides", 1),
            "padding": _pads(a, op_type, x.shape[2:], _weight_kernel(xs[1], transposed)),
            "dilation": _pair(a.get("dilations"), "dilations", 1),
            "groups": int(a.get("group", 1)),
        }
        inputs = [x, *(ctx.tensor(v) for v, n in zip(xs[1:], node.input[1:], strict=True) if n)]
        return [ctx.graph.apply("conv2d", inputs, attrs)]

    return imp


def _max_pool_indices(
    ctx: ImportContext, x: Tensor, a: dict[str, object], attrs: dict[str, object]
) -> list[Value]:
    """2-D ``MaxPool`` with its ``Indices``: asgrad's index of each maximum in its
    plane (``h * W + w``, or ``h + w * H`` for ``storage_order=1``) plus the plane's
    offset ``(n * C + c) * H * W``, as ONNX's reference."""
    attrs = {**attrs, "dilation": (1, 1), "ceil_mode": False}
    y = ctx.graph.apply(
        "max_pool2d", [x], {k: attrs[k] for k in ("kernel_size", "stride", "padding")}
    )
    plane_indices = ctx.graph.apply("max_pool2d_indices", [x], attrs)
    n, c, h, w = x.shape
    if a.get("storage_order", 0):  # column-major: row + column * height
        width = ctx.graph.constant(w, dtype="int64")
        rows = floor_divide(plane_indices, width)
        columns = remainder(plane_indices, width)
        plane_indices = rows + columns * ctx.graph.constant(h, dtype="int64")
    offsets = (np.arange(n * c, dtype=np.int64) * (h * w)).reshape(n, c, 1, 1)
    return [y, plane_indices + ctx.tensor(Static(offsets))]


def _pool(average: bool) -> Importer:
    op_type = "AveragePool" if average else "MaxPool"

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a = attributes(node)
        x = ctx.tensor(xs[0])
        wants_indices = len(node.output) > 1 and bool(node.output[1])
        if len(x.shape) in (3, 4, 5) and not wants_indices and not _plain_2d(x, a):
            return [_pool_windows(ctx, x, a, average)]
        _check_2d(x, op_type)
        if a.get("ceil_mode", 0):
            raise OnnxImportError(f"{op_type} with ceil_mode=1 is not supported")
        if _pair(a.get("dilations"), "dilations", 1) != (1, 1):
            raise OnnxImportError(f"{op_type} with dilations is not supported")
        attrs: dict[str, object] = {
            "kernel_size": _pair(a["kernel_shape"], "kernel_shape", 1),
            "stride": _pair(a.get("strides"), "strides", 1),
            "padding": _pads(a, op_type, x.shape[2:], tuple(a["kernel_shape"])),
        }
        if wants_indices:
            return _max_pool_indices(ctx, x, a, attrs)
        if average:
            attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
        return [ctx.graph.apply("avg_pool2d" if average else "max_pool2d", [x], attrs)]

    return imp


def _window_pads(
    a: dict[str, object], op: str, spatial: tuple[int, ...], kernel: list[int]
) -> list[int]:
    """A pool's pads (begins then ends) in any number of spatial dimensions."""
    rank = len(kernel)
    strides = _ints(a.get("strides"), rank, "strides", 1)
    dilations = _ints(a.get("dilations"), rank, "dilations", 1)
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for n, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small, large = total // 2, total - total // 2
            begins.append(small if auto == "SAME_UPPER" else large)
            ends.append(large if auto == "SAME_UPPER" else small)
        return [*begins, *ends]
    if auto not in ("NOTSET", "VALID"):
        raise OnnxImportError(f"{op} with auto_pad={auto} is not supported; give explicit pads")
    return _ints(a.get("pads") if auto == "NOTSET" else None, 2 * rank, "pads", 0)


def _lp_pool(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``(sum of |x|^p over each window)^(1/p)`` in 1 to 3 spatial dimensions, the
    zero padding adding nothing: the windows are strided slices of the padded input."""
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape) - 2
    if rank < 1:
        raise OnnxImportError(f"LpPool on a rank-{len(x.shape)} input")
    if a.get("ceil_mode", 0):
        raise OnnxImportError("LpPool with ceil_mode=1 is not supported")
    kernel = _ints(a.get("kernel_shape"), rank, "kernel_shape", 1)
    strides = _ints(a.get("strides"), rank, "strides", 1)
    dilations = _ints(a.get("dilations"), rank, "dilations", 1)
    pads = _window_pads(a, "LpPool", tuple(x.shape[2:]), kernel)
    p = int(a.get("p", 2))
    if p < 1 or min(pads) < 0:
        raise OnnxImportError(f"LpPool with p={p} and pads {pads} is not supported")
    powered = x * x if p == 2 else (x.abs() if p == 1 else x.abs() ** float(p))
    if any(pads):
        widths = [(0, 0), (0, 0), *zip(pads[:rank], pads[rank:], strict=True)]
        powered = pad(powered, tuple(widths))
    outs = []
    for n, k, s, d in zip(powered.shape[2:], kernel, strides, dilations, strict=True):
        outs.append((n - (k - 1) * d - 1) // s + 1)
    if min(outs) < 1:
        raise OnnxImportError(f"LpPool's windows do not fit the input {x.shape}")
    total: Tensor | None = None
    for offset in np.ndindex(*kernel):
        window = tuple(
            slice(j * d, j * d + s * (o - 1) + 1, s)
            for j, d, s, o in zip(offset, dilations, strides, outs, strict=True)
        )
        piece = powered[(slice(None), slice(None), *window)]
        total = piece if total is None else total + piece
    assert total is not None
    if p == 1:
        return [total]
    return [total.sqrt() if p == 2 else total ** (1.0 / p)]


def _plain_2d(x: Tensor, a: dict[str, object]) -> bool:
    """Whether a pool is asgrad's 2-D one: no ceil_mode or dilations, explicit
    symmetric pads at most half the kernel."""
    if len(x.shape) != 4 or a.get("ceil_mode", 0) or a.get("auto_pad", "NOTSET") != "NOTSET":
        return False
    kernel = _ints(a.get("kernel_shape"), 2, "kernel_shape", 1)
    pads = _ints(a.get("pads"), 4, "pads", 0)
    return (
        _ints(a.get("dilations"), 2, "dilations", 1) == [1, 1]
        and pads[:2] == pads[2:]
        and all(p <= k // 2 for p, k in zip(pads, kernel * 2, strict=True))
    )


def _pool_windows(ctx: ImportContext, x: Tensor, a: dict[str, object], average: bool) -> Tensor:
    """``AveragePool`` or ``MaxPool`` in 1 to 3 spatial dimensions with any pads,
    dilations and ``ceil_mode``, from strided slices of the padded input (zeros for
    the average, -inf for the max): their maximum, or their sum divided by the number
    of each window's positions inside the input (with ``count_include_pad``, inside
    the input and its pads; positions added by ``ceil_mode`` never count)."""
    op_type = "AveragePool" if average else "MaxPool"
    rank = len(x.shape) - 2
    kernel = _ints(a.get("kernel_shape"), rank, "kernel_shape", 1)
    strides = _ints(a.get("strides"), rank, "strides", 1)
    dilations = _ints(a.get("dilations"), rank, "dilations", 1)
    pads = _window_pads(a, op_type, tuple(x.shape[2:]), kernel)
    if min(pads) < 0:
        raise OnnxImportError(f"{op_type} with negative pads {pads}")
    ceil = bool(a.get("ceil_mode", 0))
    include = bool(a.get("count_include_pad", 0))
    outs, extra, counts = [], [], []
    for i, (n, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations, strict=True)):
        begin, end = pads[i], pads[rank + i]
        span = n + begin + end - (k - 1) * d - 1
        if span < 0:
            raise OnnxImportError(f"{op_type}'s windows do not fit the input {x.shape}")
        out = (-(-span // s) if ceil else span // s) + 1
        if ceil and (out - 1) * s >= n + begin:
            out -= 1  # the last window must start inside the input or its left pad
        outs.append(out)
        extra.append(max((out - 1) * s + (k - 1) * d + 1 - (n + begin + end), 0))
        low, high = (0, n + begin + end) if include else (begin, begin + n)
        starts = np.arange(out) * s
        taps = starts[:, None] + np.arange(k)[None, :] * d
        counts.append(((taps >= low) & (taps < high)).sum(axis=1))
    divisor = counts[0]
    for c in counts[1:]:
        divisor = np.multiply.outer(divisor, c)
    if np.any(divisor == 0):
        raise OnnxImportError(f"{op_type} has a window with no input in it")
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[rank + i] + extra[i]) for i in range(rank)]
    padded = x
    if any(any(w) for w in widths):
        if not average and x.dtype not in ("float32", "float64"):
            raise OnnxImportError(f"MaxPool with padding on {x.dtype}")
        padded = pad(x, tuple(widths), value=0.0 if average else -np.inf)
    total: Tensor | None = None
    for offset in np.ndindex(*kernel):
        window = tuple(
            slice(j * d, j * d + s * (o - 1) + 1, s)
            for j, d, s, o in zip(offset, dilations, strides, outs, strict=True)
        )
        piece = padded[(slice(None), slice(None), *window)]
        if total is None:
            total = piece
        else:
            total = total + piece if average else ctx.graph.apply("maximum", [total, piece], {})
    assert total is not None
    if not average:
        return total
    return total / ctx.tensor(Static(divisor.reshape(1, 1, *outs).astype(x.dtype)))


def _global_pool(op: str) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        x = ctx.tensor(xs[0])
        axes = tuple(range(2, len(x.shape)))
        return [ctx.graph.apply(op, [x], {"axis": axes, "keepdims": True})]

    return imp


def _flatten(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axis = int(attributes(node).get("axis", 1))
    if not -rank <= axis <= rank:
        raise OnnxImportError(f"Flatten's axis {axis} is outside [-{rank}, {rank}]")
    axis = axis + rank if axis < 0 else axis
    inner = 1
    for d in x.shape[axis:]:
        inner *= d
    shape = (1, -1) if axis == 0 else (-1, inner)  # -1 on the batch side: it stays free
    return [ctx.graph.apply("reshape", [x], {"shape": shape})]


def _softmax(op: str) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        x = ctx.tensor(xs[0])
        rank = len(x.shape)
        default = -1 if ctx.opset >= 13 else 1
        axis = int(attributes(node).get("axis", default)) % rank
        if ctx.opset < 13 and axis != rank - 1:
            raise OnnxImportError(
                f"{node.op_type} before opset 13 flattens from axis {axis}; only the last"
                " axis is supported there"
            )
        return [ctx.graph.apply(op, [x], {"axis": axis})]

    return imp


def _layer_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """asgrad's ``layer_norm``; the optional mean and inverse standard deviation
    outputs are computed beside it (over the normalised axes, kept as size 1)."""
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axis = int(a.get("axis", -1)) % rank
    scale = ctx.tensor(xs[1])
    eps = float(a.get("epsilon", 1e-5))
    normalized = tuple(x.shape[axis:])
    if tuple(scale.shape) != normalized:
        scale = scale.broadcast_to(normalized)
    if len(xs) > 2 and node.input[2]:
        bias = ctx.tensor(xs[2])
        if tuple(bias.shape) != normalized:
            bias = bias.broadcast_to(normalized)
    else:
        bias = scale * 0.0
    attrs = {"normalized_shape": normalized, "eps": eps}
    outs: list[Value] = [ctx.graph.apply("layer_norm", [x, scale, bias], attrs)]
    if len(node.output) > 1 and any(node.output[1:]):
        axes = tuple(range(axis, rank))
        mean = x.mean(axes, keepdims=True)
        centred = x - mean
        variance = (centred * centred).mean(axes, keepdims=True)
        outs += [mean, (variance + eps).sqrt().__rtruediv__(1.0)]
    return outs


def _batch_norm(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """The inference form by the running statistics; ``training_mode=1`` normalises by
    the batch's (population) statistics and also returns the running statistics moved
    towards them by ``1 - momentum``."""
    a = attributes(node)
    x, scale, bias, mean, var = (ctx.tensor(v) for v in xs[:5])
    channel = (-1, *([1] * (len(x.shape) - 2)))

    def per_channel(t: Tensor) -> Tensor:
        return ctx.graph.apply("reshape", [t], {"shape": channel})

    eps = float(a.get("epsilon", 1e-5))
    if not a.get("training_mode", 0):
        y = (x - per_channel(mean)) / per_channel(var + eps).sqrt()
        return [y * per_channel(scale) + per_channel(bias)]
    if ctx.opset < 14:
        raise OnnxImportError("BatchNormalization in training mode before opset 14")
    axes = tuple(i for i in range(len(x.shape)) if i != 1)
    batch_mean = x.mean(axes, keepdims=True)
    centred = x - batch_mean
    batch_var = (centred * centred).mean(axes, keepdims=True)
    y = centred / (batch_var + eps).sqrt() * per_channel(scale) + per_channel(bias)
    momentum = float(a.get("momentum", 0.9))
    flat_mean, flat_var = batch_mean.reshape((-1,)), batch_var.reshape((-1,))
    running_mean = mean * momentum + flat_mean * (1.0 - momentum)
    running_var = var * momentum + flat_var * (1.0 - momentum)
    return [y, running_mean, running_var]


def _reduce_axes(
    ctx: ImportContext, node: onnx.NodeProto, xs: list[Value], rank: int
) -> tuple[int, ...] | None:
    """The axes a Reduce* node reduces (None: none, an identity)."""
    a = attributes(node)
    if len(xs) > 1 and node.input[1]:
        raw = [int(v) for v in ctx.static(xs[1], f"{node.op_type}'s axes").reshape(-1)]
    else:
        raw = [int(v) for v in a.get("axes", [])]
    if not raw and a.get("noop_with_empty_axes", 0):
        return None
    for v in raw:
        if not -rank <= v < max(rank, 1):
            raise OnnxImportError(f"{node.op_type}'s axis {v} is outside a rank-{rank} input")
    return tuple(sorted(v % rank for v in raw)) if raw else tuple(range(rank))


def _empty_reduction(x: Tensor, axes: tuple[int, ...], keep: bool, op: str, after: str) -> Static:
    """A reduction over an empty axis: ONNX's identity element of the reduction."""
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    if not keep:
        shape = [d for i, d in enumerate(x.shape) if i not in axes]
    dtype = np.dtype(x.dtype)
    if op in ("max", "min"):
        lowest = op == "max"
        if dtype.kind == "f":
            fill: object = -np.inf if lowest else np.inf
        elif dtype.kind == "b":
            fill = not lowest
        else:
            info = np.iinfo(dtype)
            fill = info.min if lowest else info.max
    elif op == "logsumexp" or after == "log":
        fill = -np.inf
    elif op == "prod":
        fill = 1
    elif op == "mean":
        fill = np.nan
    else:  # sums, and the square root of one
        fill = 0
    return Static(np.full(shape, fill, dtype=dtype))


def _reduce(op: str, before: str = "", after: str = "") -> Importer:
    """``op`` over the node's axes, ``before`` applied to the input first (``abs``,
    ``square``, ``exp``) and ``after`` to the result (``sqrt``, ``log``); the result
    keeps the input's dtype (an integer sum would widen to int64)."""

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        x = ctx.tensor(xs[0])
        axes = _reduce_axes(ctx, node, xs, len(x.shape))
        keep = bool(attributes(node).get("keepdims", 1))
        if axes is not None and any(x.shape[i] == 0 for i in axes):
            return [_empty_reduction(x, axes, keep, op, after)]
        if before == "abs":
            x = x.abs()
        elif before == "square":
            x = x * x
        if axes is None:
            y = x
        elif op == "logsumexp":
            y = x.logsumexp(axes, keepdims=keep)
        elif op == "prod":
            y = x.prod(axes, keepdims=keep)
        else:
            y = ctx.graph.apply(op, [x], {"axis": axes, "keepdims": keep})
        if after == "sqrt":
            y = y.sqrt()
        elif after == "log":
            y = y.log()
        return [y if y.dtype == x.dtype else y.cast(x.dtype)]

    return imp


NN_IMPORTERS: dict[str, Importer] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv(transposed=False),
    "ConvTranspose": _conv_transpose,
    "LpPool": _lp_pool,
    "MaxPool": _pool(average=False),
    "AveragePool": _pool(average=True),
    "GlobalAveragePool": _global_pool("mean"),
    "GlobalMaxPool": _global_pool("max"),
    "Flatten": _flatten,
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    "LayerNormalization": _layer_norm,
    "BatchNormalization": _batch_norm,
    "ReduceSum": _reduce("sum"),
    "ReduceMean": _reduce("mean"),
    "ReduceMax": _reduce("max"),
    "ReduceMin": _reduce("min"),
    "ReduceProd": _reduce("prod"),
    "ReduceL1": _reduce("sum", before="abs"),
    "ReduceL2": _reduce("sum", before="square", after="sqrt"),
    "ReduceSumSquare": _reduce("sum", before="square"),
    "ReduceLogSum": _reduce("sum", after="log"),
    "ReduceLogSumExp": _reduce("logsumexp"),
}
