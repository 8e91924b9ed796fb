"""Group, instance and RMS normalisation, ``normalize`` and the distances, in
PyTorch's functional names and argument names (``torch.nn.functional``).

Each appends one op that expands into primitives (see ``tensor/ops/norm_groups.py``).

>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.tensor.api.nn_norms import cosine_similarity, group_norm
>>> g = Graph()
>>> x = g.input("x", (2, 4, 3, 3))
>>> group_norm(x, 2).shape
(2, 4, 3, 3)
>>> a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
>>> feeds = {"a": [[1, 0, 0], [1, 1, 0]], "b": [[2, 0, 0], [0, 1, 1]]}
>>> evaluate([cosine_similarity(a, b)], feeds)[0].round(4)
array([1. , 0.5], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.common import int_arg
from asgrad.tensor.ir.registry import given_attrs

__all__ = [
    "cosine_similarity",
    "group_norm",
    "instance_norm",
    "normalize",
    "pairwise_distance",
    "rms_norm",
]


def _affine(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> tuple[Tensor, ...]:
    if weight is None and bias is None:
        return (x,)
    channels = (x.shape[1],)
    w = weight if weight is not None else x.graph.constant(1.0, x.dtype).broadcast_to(channels)
    b = bias if bias is not None else x.graph.constant(0.0, x.dtype).broadcast_to(channels)
    return (x, w, b)


def group_norm(
    x: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Normalise each group of ``C / num_groups`` channels (axis 1) of each sample by
    its own mean and (biased) variance, then scale and shift per channel (``eps``
    None: the op's default).

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_norms import group_norm
    >>> g = Graph()
    >>> x = g.input("x", (1, 2, 2))
    >>> evaluate(group_norm(x, 2), {"x": [[[1.0, 3.0], [5.0, 5.0]]]})[0].round(3).tolist()
    [[[-1.0, 1.0], [0.0, 0.0]]]
    """
    groups = int_arg(num_groups, "group_norm's num_groups")
    attrs = {"num_groups": groups, **given_attrs(eps=eps)}
    return x.graph.apply("group_norm", _affine(x, weight, bias), attrs)


def instance_norm(
    x: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float | None = None,
) -> Tensor:
    """Normalise each channel of each sample over its spatial axes (a group norm with
    one channel a group). Running statistics are not supported: normalisation always
    uses the input's own statistics (PyTorch's default, ``track_running_stats=False``).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_norms import instance_norm
    >>> g = Graph()
    >>> x = g.input("x", (1, 4, 8, 8))
    >>> instance_norm(x).shape
    (1, 4, 8, 8)
    """
    if running_mean is not None or running_var is not None or not use_input_stats:
        raise ArgumentError(
            "instance_norm uses each input's own statistics; running statistics"
            " (track_running_stats=True) are not supported: leave them out"
        )
    return group_norm(x, x.shape[1], weight, bias, eps)


def rms_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape``
    axes; ``eps`` None is the dtype's machine epsilon (PyTorch's default).

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_norms import rms_norm
    >>> x = Graph().input("x", (1, 2))
    >>> evaluate(rms_norm(x, 2), {"x": [[3.0, 4.0]]})[0].tolist()
    [[0.84852..., 1.13137...]]
    """
    given = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    shape = tuple(int_arg(d, "rms_norm's normalized_shape") for d in given)
    inputs = (x,) if weight is None else (x, weight)
    attrs = {"normalized_shape": shape, **given_attrs(eps=eps)}
    return x.graph.apply("rms_norm", inputs, attrs)


def normalize(
    x: Tensor,
    p: float | None = None,
    dim: int | None = None,
    eps: float | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim`` (or ``axis``; None: the op's defaults,
    PyTorch's).

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_norms import normalize
    >>> g = Graph()
    >>> x = g.input("x", (1, 2))
    >>> evaluate(normalize(x), {"x": [[3.0, 4.0]]})[0].round(4)
    array([[0.6, 0.8]], dtype=float32)
    """
    given = axis_arg("normalize", axis, dim)
    chosen = None if given is None else int_arg(given, "normalize's dim")
    attrs = given_attrs(p=p, axis=chosen, eps=eps)
    return x.graph.apply("normalize", (x,), attrs)


def cosine_similarity(
    x1: Tensor,
    x2: Tensor,
    dim: int | None = None,
    eps: float | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim`` (or ``axis``;
    broadcast first), each norm clamped below by ``eps`` (None: the op's defaults,
    PyTorch's).

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_norms import cosine_similarity
    >>> g = Graph()
    >>> a, b = g.input("a", (1, 2)), g.input("b", (1, 2))
    >>> evaluate(cosine_similarity(a, b), {"a": [[1.0, 0.0]], "b": [[0.0, 2.0]]})[0].tolist()
    [0.0]
    """
    given = axis_arg("cosine_similarity", axis, dim)
    chosen = None if given is None else int_arg(given, "cosine_similarity's dim")
    attrs = given_attrs(axis=chosen, eps=eps)
    return x1.graph.apply("cosine_similarity", (x1, x2), attrs)


def pairwise_distance(
    x1: Tensor,
    x2: Tensor,
    p: float | None = None,
    eps: float | None = None,
    keepdim: bool | None = None,
) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last axis (None: the op's defaults, PyTorch's).

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_norms import pairwise_distance
    >>> g = Graph()
    >>> a, b = g.input("a", (1, 2)), g.input("b", (1, 2))
    >>> d = pairwise_distance(a, b)
    >>> evaluate(d, {"a": [[0.0, 0.0]], "b": [[3.0, 4.0]]})[0].round(3).tolist()
    [5.0]
    """
    attrs = given_attrs(p=p, eps=eps, keepdim=keepdim)
    return x1.graph.apply("pairwise_distance", (x1, x2), attrs)
