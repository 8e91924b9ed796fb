"""Margin and embedding losses: hinge, multi-class margin, cosine, triplet and ranking."""

from __future__ import annotations

from asgrad.nn.losses.common import (
    Reduction,
    Weight,
    check_float_input,
    check_reduction,
    like_input,
    reduce,
    weight_tensor,
)
from asgrad.tensor import Tensor, where
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import is_int

__all__ = [
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "hinge_loss",
    "margin_ranking_loss",
    "multi_margin_loss",
    "squared_hinge_loss",
    "triplet_margin_loss",
]


def _sign_target(name: str, target: Tensor, input: Tensor) -> Tensor:
    if not isinstance(target, Tensor):
        raise ArgumentTypeError(
            f"{name}: target must be a Tensor of 1 and -1, got {type(target).__name__}"
        )
    if target.dtype == "bool":
        raise DTypeError(
            f"{name}: target must hold 1 and -1, got bool; map it with where(t, 1, -1)"
        )
    return like_input(name, "target", target, input, same_shape=False)


def hinge_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """Binary hinge loss ``max(0, margin - target * input)`` with targets of 1 and -1.

    The loss of a linear SVM (Keras' ``hinge``, elementwise here): ``input`` is a raw
    score, ``target`` holds +1/-1 (integer or float) and has ``input``'s shape. For
    the multi-class hinge see [`multi_margin_loss`][asgrad.nn.multi_margin_loss]; for PyTorch's
    ``hinge_embedding_loss`` (distances, not scores) see
    [`hinge_embedding_loss`][asgrad.nn.hinge_embedding_loss].

    >>> from asgrad.nn import hinge_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, t = g.constant([0.5, 2.0]), g.constant([1.0, -1.0])
    >>> round(float(evaluate(hinge_loss(x, t, reduction="sum"))[0]), 4)
    3.5
    """
    name = "hinge_loss"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    like_input(name, "target", t, input)
    return reduce((margin - t * input).relu(), reduction)


def squared_hinge_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """``max(0, margin - target * input)**2`` with targets of 1 and -1 (see
    [`hinge_loss`][asgrad.nn.hinge_loss]).

    >>> from asgrad.nn import squared_hinge_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, t = g.constant([0.5, 2.0]), g.constant([1.0, -1.0])
    >>> round(float(evaluate(squared_hinge_loss(x, t, reduction="sum"))[0]), 4)
    9.25
    """
    name = "squared_hinge_loss"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    like_input(name, "target", t, input)
    h = (margin - t * input).relu()
    return reduce(h * h, reduction)


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """PyTorch's ``hinge_embedding_loss``: ``x`` where target is 1, ``max(0, margin - x)`` where -1.

    ``input`` is usually a distance between two embeddings.

    >>> from asgrad.nn import hinge_embedding_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, t = g.constant([0.5, 0.25]), g.constant([1.0, -1.0])
    >>> round(float(evaluate(hinge_embedding_loss(x, t, reduction="sum"))[0]), 4)
    1.25
    """
    name = "hinge_embedding_loss"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    like_input(name, "target", t, input)
    zero = input.graph.constant(0.0, input.dtype)
    pos = where(t != -1.0, input, zero)
    neg = where(t != 1.0, (margin - input).relu(), zero)
    return reduce(pos + neg, reduction)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Weight = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """Multi-class hinge loss, as PyTorch's ``multi_margin_loss``.

    For scores ``x`` of shape ``(N, C)`` (or ``(C,)``) and integer labels ``y``:
    ``sum_{j != y} max(0, margin - x[y] + x[j])**p / C``, times ``weight[y]`` if given.
    A label outside ``[0, C)`` raises [`OutOfRangeError`][asgrad.tensor.OutOfRangeError]
    when the graph runs, as in PyTorch.

    >>> from asgrad.nn import multi_margin_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.constant([[0.1, 0.2, 0.4, 0.8]]), g.constant([3])
    >>> round(float(evaluate(multi_margin_loss(x, y))[0]), 4)
    0.325
    """
    name = "multi_margin_loss"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    if p not in (1, 2):
        raise ArgumentError(f"{name}: p must be 1 or 2, got {p}")
    if not is_int(target.dtype):
        raise DTypeError(f"{name}: target must hold integer class labels, got {target.dtype}")
    if input.ndim not in (1, 2) or target.shape != input.shape[:-1]:
        raise ShapeError(
            f"{name}: needs scores (N, C) or (C,) and labels (N,) or (); got"
            f" {list(input.shape)} and {list(target.shape)}"
        )
    n_classes = input.shape[-1]
    onehot = target.one_hot(n_classes, input.dtype)
    x_y = (input * onehot).sum(axis=-1, keepdims=True)
    h = (margin - x_y + input).relu() * (1.0 - onehot)
    if p == 2:
        h = h * h
    loss = h.sum(axis=-1) * (1.0 / n_classes)
    w = weight_tensor(name, weight, input, (n_classes,))
    if w is not None:
        loss = loss * (onehot * w).sum(axis=-1)
    return reduce(loss, reduction)


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where -1.

    ``input1`` and ``input2`` are ``(N, D)`` (or ``(D,)``), ``target`` is ``(N,)`` (or
    a scalar) of 1 and -1. The cosine is ``x1.x2 / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))``,
    as PyTorch.

    >>> from asgrad.nn import cosine_embedding_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a = b = g.constant([[1.0, 0.0], [1.0, 0.0]])
    >>> t = g.constant([1.0, -1.0])
    >>> round(float(evaluate(cosine_embedding_loss(a, b, t))[0]), 4)
    0.5
    """
    name = "cosine_embedding_loss"
    check_float_input(name, "input1", input1)
    check_reduction(name, reduction)
    x2 = like_input(name, "input2", input2, input1)
    if input1.ndim not in (1, 2):
        raise ShapeError(f"{name}: inputs must be (N, D) or (D,), got {list(input1.shape)}")
    t = _sign_target(name, target, input1)
    if t.shape != input1.shape[:-1]:
        raise ShapeError(
            f"{name}: target must have shape {list(input1.shape[:-1])}, got {list(t.shape)}"
        )
    eps = 1e-12
    dot = (input1 * x2).sum(axis=-1)
    mag1 = (input1 * input1).sum(axis=-1) + eps
    mag2 = (x2 * x2).sum(axis=-1) + eps
    cos = dot / (mag1 * mag2).sqrt()
    zero = input1.graph.constant(0.0, input1.dtype)
    pos = where(t == 1.0, 1.0 - cos, zero)
    neg = where(t == -1.0, (cos - margin).relu(), zero)
    return reduce(pos + neg, reduction)


def _pairwise_distance(a: Tensor, b: Tensor, p: float, eps: float) -> Tensor:
    d = a - b + eps
    if p == 2:
        return (d * d).sum(axis=-1).sqrt()
    if p == 1:
        return d.abs().sum(axis=-1)
    return (d.abs() ** p).sum(axis=-1) ** (1.0 / p)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: Reduction = "mean",
) -> Tensor:
    """``max(0, margin + d(a, pos) - d(a, neg))`` with ``d(x, y) = ||x - y + eps||_p``.

    As PyTorch: inputs ``(N, D)`` (or ``(D,)``), distances along the last axis;
    ``swap=True`` uses ``min(d(a, neg), d(pos, neg))`` as the negative distance.

    >>> from asgrad.nn import triplet_margin_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, p, n = g.constant([[0.0, 0.0]]), g.constant([[0.0, 3.0]]), g.constant([[0.0, 1.0]])
    >>> round(float(evaluate(triplet_margin_loss(a, p, n))[0]), 4)
    3.0
    """
    name = "triplet_margin_loss"
    check_float_input(name, "anchor", anchor)
    check_reduction(name, reduction)
    if p <= 0:
        raise ArgumentError(f"{name}: p must be > 0, got {p}")
    pos = like_input(name, "positive", positive, anchor)
    neg = like_input(name, "negative", negative, anchor)
    if anchor.ndim not in (1, 2):
        raise ShapeError(f"{name}: inputs must be (N, D) or (D,), got {list(anchor.shape)}")
    d_pos = _pairwise_distance(anchor, pos, p, eps)
    d_neg = _pairwise_distance(anchor, neg, p, eps)
    if swap:
        d_neg = d_neg.minimum(_pairwise_distance(pos, neg, p, eps))
    return reduce((d_pos - d_neg + margin).relu(), reduction)


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)`` with targets of 1 and -1.

    >>> from asgrad.nn import margin_ranking_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, b, t = g.constant([1.0, 2.0]), g.constant([2.0, 1.0]), g.constant([1.0, 1.0])
    >>> round(float(evaluate(margin_ranking_loss(a, b, t))[0]), 4)
    0.5
    """
    name = "margin_ranking_loss"
    check_float_input(name, "input1", input1)
    check_reduction(name, reduction)
    x2 = like_input(name, "input2", input2, input1)
    t = _sign_target(name, target, input1)
    like_input(name, "target", t, input1)
    return reduce((-t * (input1 - x2) + margin).relu(), reduction)
