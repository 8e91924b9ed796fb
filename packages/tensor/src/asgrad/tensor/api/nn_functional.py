"""Neural-network functions over tensors, in PyTorch's argument names (NCHW layout).

Each function checks and normalises its arguments and appends one registered op
(or a short composition of them), so shape errors name the caller's line. These are
the front doors of the conv, pool, norm, random and optim ops: ``asgrad.nn``'s
layers and optimizers call them, so each op's attributes are built here only.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.tensor.api.nn_functional import conv2d, max_pool2d
>>> g = Graph()
>>> x = g.input("x", (2, 1, 8, 8))
>>> w = g.constant(np.ones((4, 1, 3, 3), np.float32))
>>> y = max_pool2d(conv2d(x, w, padding=1), 2)
>>> y.shape
(2, 4, 4, 4)
>>> float(evaluate([y], {"x": np.ones((2, 1, 8, 8), np.float32)})[0].max())
9.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple, ParamSpec, TypeVar

import numpy as np

from asgrad.tensor.api.functional import size_ratio
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import AsgradError, DTypeError, GraphError, ShapeError
from asgrad.tensor.ir.common import int_arg
from asgrad.tensor.ir.dtypes import is_int
from asgrad.tensor.ir.graph import user_location
from asgrad.tensor.ir.registry import get_op, given_attrs
from asgrad.tensor.ops.spatial import Pair, pair

IntOrPair = int | Sequence[int]
P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "BatchNormOutput",
    "adam_ema",
    "adam_update",
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "batch_normalize",
    "conv2d",
    "conv_transpose2d",
    "dropout",
    "dropout2d",
    "embedding",
    "layer_norm",
    "max_pool2d",
]


def _named(op: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Prefix the argument errors a wrapper raises itself with ``op`` and the user's line."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except AsgradError as exc:
                if "\n  (at " in str(exc):  # raised by Graph.apply: already complete
                    raise
                raise type(exc)(f"{op}: {exc}\n  (at {user_location()})") from None

        return wrapper

    return decorate


def _with_bias(x: Tensor, w: Tensor, b: Tensor | None) -> tuple[Tensor, ...]:
    return (x, w) if b is None else (x, w, b)


def _same_padding(w: Tensor, dilation: Pair, stride: Pair) -> Pair:
    if stride != (1, 1):
        raise ShapeError("padding='same' needs stride 1; give the padding explicitly")
    total = [dilation[i] * (w.shape[2 + i] - 1) for i in range(2)]
    if total[0] % 2 or total[1] % 2:
        raise ShapeError(
            f"padding='same' with kernel {list(w.shape[2:])} and dilation {list(dilation)}"
            " needs asymmetric padding; use an odd kernel size"
        )
    return total[0] // 2, total[1] // 2


@_named("conv2d")
def conv2d(
    x: Tensor,
    w: Tensor,
    b: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair | str = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution of ``x`` (N, C, H, W) with ``w`` (O, C/groups, kH, kW).

    ``padding`` is an int, a pair, ``"valid"`` (0) or ``"same"`` (stride 1 only);
    ``b`` (O,) is added per output channel. Output (N, O, OH, OW) with
    OH = floor((H + 2 padding - dilation (kH - 1) - 1) / stride) + 1.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_functional import conv2d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> w = g.input("w", (6, 4, 3, 3))
    >>> conv2d(x, w, padding=1).shape
    (1, 6, 8, 8)
    """
    st = pair(stride, "stride", minimum=1)
    dil = pair(dilation, "dilation", minimum=1)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ShapeError(f"padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        pad = (0, 0) if padding == "valid" else _same_padding(w, dil, st)
    else:
        pad = pair(padding, "padding")
    attrs = {"stride": st, "padding": pad, "dilation": dil, "groups": int(groups)}
    return x.graph.apply("conv2d", _with_bias(x, w, b), attrs)


@_named("conv_transpose2d")
def conv_transpose2d(
    x: Tensor,
    w: Tensor,
    b: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    output_padding: IntOrPair = 0,
    groups: int = 1,
    dilation: IntOrPair = 1,
) -> Tensor:
    """Transposed convolution of ``x`` (N, C_in, H, W) with ``w`` (C_in, C_out/groups, kH, kW).

    The gradient of `conv2d` with respect to its input, as a layer (PyTorch's
    argument order). Output size (H - 1) stride - 2 padding + dilation (kH - 1) +
    output_padding + 1; ``output_padding`` must be smaller than ``stride``.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_functional import conv_transpose2d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> w = g.input("w", (4, 6, 2, 2))
    >>> conv_transpose2d(x, w, stride=2).shape
    (1, 6, 16, 16)
    """
    attrs = {
        "stride": pair(stride, "stride", minimum=1),
        "padding": pair(padding, "padding"),
        "dilation": pair(dilation, "dilation", minimum=1),
        "groups": int(groups),
        "output_padding": pair(output_padding, "output_padding"),
    }
    return x.graph.apply("conv_transpose2d", _with_bias(x, w, b), attrs)


def _pool_attrs(
    kernel_size: IntOrPair, stride: IntOrPair | None, padding: IntOrPair
) -> dict[str, Pair]:
    kernel = pair(kernel_size, "kernel_size", minimum=1)
    return {
        "kernel_size": kernel,
        "stride": kernel if stride is None else pair(stride, "stride", minimum=1),
        "padding": pair(padding, "padding"),
    }


@_named("max_pool2d")
def max_pool2d(
    x: Tensor, kernel_size: IntOrPair, stride: IntOrPair | None = None, padding: IntOrPair = 0
) -> Tensor:
    """The max of each kH x kW window (stride defaults to the kernel size).

    Padding is with -inf and at most half the kernel; the gradient goes to each
    window's first maximum, as in PyTorch.
    """
    return x.graph.apply("max_pool2d", (x,), _pool_attrs(kernel_size, stride, padding))


@_named("avg_pool2d")
def avg_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    count_include_pad: bool | None = None,
) -> Tensor:
    """The mean of each kH x kW window; zero padding counts unless ``count_include_pad=False``."""
    attrs = {
        **_pool_attrs(kernel_size, stride, padding),
        **given_attrs(count_include_pad=count_include_pad),
    }
    return x.graph.apply("avg_pool2d", (x,), attrs)


@_named("adaptive_avg_pool2d")
def adaptive_avg_pool2d(x: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """Average pooling to ``output_size`` (an int, or a pair; None keeps that size).

    Output cell i averages input rows floor(i H / OH) to ceil((i + 1) H / OH), as in
    PyTorch; ``adaptive_avg_pool2d(x, 1)`` is global average pooling.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_functional import adaptive_avg_pool2d
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> adaptive_avg_pool2d(x, (2, 4)).shape
    (1, 4, 2, 4)
    """
    if x.ndim != 4:
        raise ShapeError(f"input must be (N, C, H, W), got {x.shape}")
    if isinstance(output_size, int | np.integer):
        size: Pair = (int(output_size), int(output_size))
    else:
        items = list(output_size)
        if len(items) != 2:
            raise ShapeError(f"output_size must be an int or a pair, got {output_size!r}")
        h, w = (x.shape[2 + i] if v is None else int(v) for i, v in enumerate(items))
        size = (h, w)
    return x.graph.apply("adaptive_avg_pool2d", (x,), {"output_size": size})


def _affine_inputs(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, shape: tuple[int, ...]
) -> tuple[Tensor, ...]:
    """``(x,)``, or ``(x, weight, bias)`` with a missing one as ones or zeros of ``shape``."""
    if weight is None and bias is None:
        return (x,)
    w = weight if weight is not None else x.graph.constant(np.ones(shape), x.dtype)
    b = bias if bias is not None else x.graph.constant(np.zeros(shape), x.dtype)
    return (x, w, b)


@_named("layer_norm")
def layer_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float | None = None,
    *,
    normalized_shape: Sequence[int] | None = None,
) -> Tensor:
    """Normalise over the trailing axes, then scale by ``weight`` and shift by ``bias``.

    ``normalized_shape`` defaults to the weight's shape, or to the last axis. The
    variance is the population variance, as in PyTorch. A composite op; ``eps`` None
    is the op's default.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_functional import layer_norm
    >>> x = Graph().input("x", (1, 2))
    >>> evaluate(layer_norm(x), {"x": [[1.0, 3.0]]})[0].round(3).tolist()
    [[-1.0, 1.0]]
    """
    if normalized_shape is None:
        shape = tuple(weight.shape) if weight is not None else (x.shape[-1],)
    else:
        shape = tuple(int_arg(d, "layer_norm's normalized_shape") for d in normalized_shape)
    inputs = _affine_inputs(x, weight, bias, shape)
    attrs = {"normalized_shape": shape, **given_attrs(eps=eps)}
    return x.graph.apply("layer_norm", inputs, attrs)


class BatchNormOutput(NamedTuple):
    """The normalised value and the running statistics to store after this step.

    In training, ``running_mean`` and ``running_var`` are new graph values (give
    them to the program's ``updates``); in evaluation they are the inputs.
    """

    y: Tensor
    running_mean: Tensor | None
    running_var: Tensor | None


def _channel(v: Tensor, ndim: int) -> Tensor:
    """A per-channel (C,) vector shaped to broadcast against (N, C, ...)."""
    return v.reshape((v.shape[0],) + (1,) * (ndim - 2)) if ndim > 2 else v


@_named("batch_norm")
def batch_normalize(
    x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """Normalise each channel (axis 1) of ``x`` by this batch's own mean and variance.

    The ``batch_norm`` op (a composite) and the core of `batch_norm` in training,
    without running statistics. The statistics are taken when the graph runs, over
    however many values a channel then holds, so no batch size is checked here.
    """
    if x.ndim < 2:
        raise ShapeError(f"input must be (N, C, ...), got {x.shape}")
    inputs = _affine_inputs(x, weight, bias, (x.shape[1],))
    return x.graph.apply("batch_norm", inputs, given_attrs(eps=eps))


@_named("batch_norm")
def batch_norm(
    x: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float | None = None,
) -> BatchNormOutput:
    """Batch normalisation over every axis but the channel axis 1 of (N, C, ...).

    Training normalises by the batch statistics (`batch_normalize`) and
    returns the new running statistics ``(1 - momentum) running + momentum batch``
    (the variance unbiased, as in PyTorch) for the program to store through its
    ``updates``. Evaluation normalises by the running statistics, which must then be
    given. ``eps`` None is the ``batch_norm`` op's default.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_functional import batch_norm
    >>> g = Graph()
    >>> x = g.input("x", (2, 1))
    >>> mean, var = g.constant([1.0]), g.constant([4.0])
    >>> out = batch_norm(x, mean, var, eps=0.0)  # evaluation: the running statistics
    >>> evaluate(out.y, {"x": [[1.0], [5.0]]})[0].tolist()
    [[0.0], [2.0]]
    """
    if x.ndim < 2:
        raise ShapeError(f"input must be (N, C, ...), got {x.shape}")
    channels = x.shape[1]
    for t, name in (
        (running_mean, "running_mean"),
        (running_var, "running_var"),
        (weight, "weight"),
        (bias, "bias"),
    ):
        if t is not None and t.shape != (channels,):
            raise ShapeError(f"{name} has shape {t.shape}, expected ({channels},)")
    if not training:
        if running_mean is None or running_var is None:
            raise GraphError("evaluation needs running_mean and running_var")
        if eps is None:
            eps = get_op("batch_norm").attr("eps").default
        y = (x - _channel(running_mean, x.ndim)) / (_channel(running_var, x.ndim) + eps).sqrt()
        if weight is not None:
            y = y * _channel(weight, x.ndim)
        if bias is not None:
            y = y + _channel(bias, x.ndim)
        return BatchNormOutput(y, running_mean, running_var)
    count = x.size // channels
    if count <= 1:
        raise ShapeError(f"training needs more than one value per channel, got input {x.shape}")
    y = batch_normalize(x, weight, bias, eps)
    if running_mean is None or running_var is None:
        return BatchNormOutput(y, running_mean, running_var)
    axes = (0, *range(2, x.ndim))
    mean = x.mean(axis=axes)
    n = size_ratio(x, mean)  # values per channel, read at run time
    var = x.var(axis=axes) * (n / (n - 1.0))
    new_mean = running_mean * (1.0 - momentum) + mean * momentum
    new_var = running_var * (1.0 - momentum) + var * momentum
    return BatchNormOutput(y, new_mean, new_var)


@_named("dropout")
def dropout(
    x: Tensor, p: float = 0.5, seed: Tensor | int | None = None, training: bool = True
) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p).

    The mask is a hash of ``(seed, element index)``: the same seed gives the same
    mask on every backend. For a fresh mask every step, pass a seed that changes:
    an int scalar input fed per step, or a Variable's value that the training
    program advances through its updates. Identity when not ``training`` or p = 0.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_functional import dropout
    >>> x = Graph().input("x", (4,))
    >>> evaluate(dropout(x, 0.5, training=False), {"x": [1.0, 2.0, 3.0, 4.0]})[0].tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if seed is None:
        raise GraphError(
            "dropout in training needs a seed: an int scalar Tensor that changes every"
            " step (fed, or a Variable the program advances)"
        )
    seed_t = seed if isinstance(seed, Tensor) else x.graph.constant(int(seed), "int64")
    return x.graph.apply("dropout", (x, seed_t), {"p": float(p)})


def dropout2d(
    x: Tensor, p: float = 0.5, seed: Tensor | int | None = None, training: bool = True
) -> Tensor:
    """Zero whole channels with probability ``p`` and scale the rest by 1 / (1 - p), as
    ``torch.nn.functional.dropout2d``: ``x`` is ``(N, C, H, W)`` or one sample
    ``(C, H, W)``; one draw per (sample, channel). ``seed`` as for
    [`dropout`][asgrad.nn.functional.dropout].

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_functional import dropout2d
    >>> x = Graph().input("x", (1, 4, 2, 2))
    >>> y = evaluate(dropout2d(x, 0.5, seed=0), {"x": [[[[1.0] * 2] * 2] * 4]})[0]
    >>> set(y.ravel().tolist()) <= {0.0, 2.0}  # channels zeroed, the rest doubled
    True
    """
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"dropout2d takes (N, C, H, W) or (C, H, W), got shape {list(x.shape)};"
            " dropout() drops single elements"
        )
    if not training or p == 0.0:
        return dropout(x, p, seed, training)
    channels = x[(slice(None),) * (x.ndim - 2) + (slice(0, 1), slice(0, 1))]
    ones = x.graph.apply("broadcast_like", (x.graph.constant(1.0, x.dtype), channels), {})
    return x * dropout(ones, p, seed, training)


@_named("embedding")
def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) at integer ``indices``: shape (*indices, dim)."""
    if not is_int(indices.dtype):
        raise DTypeError(f"indices must be int32 or int64, got {indices.dtype}")
    if weight.ndim != 2:
        raise ShapeError(f"weight must be (num_embeddings, dim), got {weight.shape}")
    return weight.gather(indices, axis=0)


# -- optimizer steps ----------------------------------------------------------------------------
@_named("adam_ema")
def adam_ema(m: Tensor, g: Tensor, beta: float, *, square: bool | None = None) -> Tensor:
    """Adam's moment update ``beta * m + (1 - beta) * g`` (``g * g`` with ``square``).

    A composite op (one kernel), the same arithmetic in the same order as the graph-op
    form.
    """
    return m.graph.apply("adam_ema", (m, g), {"beta": beta, **given_attrs(square=square)})


@_named("adam_update")
def adam_update(
    param: Tensor,
    m: Tensor,
    v: Tensor,
    step_size: Tensor,
    bc2_sqrt: Tensor,
    decay: Tensor | None = None,
    *,
    eps: float | None = None,
) -> Tensor:
    """Adam's parameter step ``param * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps)``.

    ``step_size``, ``bc2_sqrt`` and ``decay`` (AdamW's ``1 - lr * weight_decay``;
    none for Adam) are 0-d tensors computed once per step. A composite op (one kernel);
    ``eps`` None is the op's default.
    """
    scalars = (step_size, bc2_sqrt) if decay is None else (step_size, bc2_sqrt, decay)
    return param.graph.apply("adam_update", (param, m, v, *scalars), given_attrs(eps=eps))
