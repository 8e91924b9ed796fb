"""Loss functions on symbolic tensors, with the names and semantics of ``torch.nn.functional``.

Every loss takes ``reduction="mean" | "sum" | "none"`` (``kl_div`` also
``"batchmean"``): ``"none"`` returns the per-element (or per-sample) losses,
``"sum"`` their sum and ``"mean"`` their mean, exactly as PyTorch. Means are
computed when the graph runs, so a batch of any size may be fed.

Losses are compositions of primitive ops (``log_softmax``, ``softplus``, ``where``,
``clamp``...), chosen for numerical stability: cross-entropy goes through
``log_softmax`` and the logit losses through ``softplus``, so large logits never
overflow. Gradients come from the primitives' rules.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> logits, labels = g.input("logits", (2, 3)), g.input("labels", (2,), "int64")
>>> loss = cross_entropy(logits, labels)
>>> x = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
>>> round(float(evaluate(loss, {"logits": x, "labels": np.array([0, 1])})[0]), 4)
0.6691
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from asgrad.tensor import Tensor, where
from asgrad.tensor.dtypes import is_float, is_int
from asgrad.tensor.errors import DTypeError, ShapeError

__all__ = [
    "Reduction",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "cross_entropy",
    "hinge_embedding_loss",
    "hinge_loss",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "margin_ranking_loss",
    "mse_loss",
    "multi_margin_loss",
    "nll_loss",
    "reduce",
    "sigmoid_focal_loss",
    "smooth_l1_loss",
    "squared_hinge_loss",
    "triplet_margin_loss",
]

Reduction = Literal["mean", "sum", "none"]
KLReduction = Literal["mean", "sum", "none", "batchmean"]
Weight = Tensor | np.ndarray | None

# PyTorch clamps binary_cross_entropy's logs at -100; clamping the probability at
# e**-100 first gives the same forward values and keeps the gradient finite.
_LOG_FLOOR = math.exp(-100.0)


def reduce(loss: Tensor, reduction: str) -> Tensor:
    """Apply ``reduction`` (``"mean"``, ``"sum"`` or ``"none"``) to per-element losses."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# -- argument checks ------------------------------------------------------------------------
def _check_reduction(
    name: str, reduction: str, allowed: tuple[str, ...] = ("mean", "sum", "none")
) -> None:
    if reduction not in allowed:
        raise ValueError(
            f"{name}: reduction must be one of {', '.join(map(repr, allowed))}, got {reduction!r}"
        )


def _float_input(name: str, what: str, t: Tensor) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if not is_float(t.dtype):
        raise DTypeError(
            f"{name}: {what} must be float32 or float64, got {t.dtype};"
            " cast it with .cast('float32')"
        )


def _like(
    name: str, what: str, t: Tensor, input: Tensor, *, same_shape: bool = True
) -> Tensor:  # PyTorch's name
    """``t`` checked against ``input``: same shape (if asked) and dtype (ints/bools are cast)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if same_shape and t.shape != input.shape:
        raise ShapeError(
            f"{name}: input {list(input.shape)} and {what} {list(t.shape)} differ;"
            f" reshape the {what} to the input's shape"
        )
    if is_float(t.dtype) and t.dtype != input.dtype:
        raise DTypeError(
            f"{name}: input is {input.dtype} but {what} is {t.dtype}; cast the {what}"
            f" with .cast({input.dtype!r})"
        )
    return t if t.dtype == input.dtype else t.cast(input.dtype)


def _weight(
    name: str, weight: Weight, input: Tensor, shape: tuple[int, ...] | None = None
) -> Tensor | None:
    if weight is None:
        return None
    w = (
        weight
        if isinstance(weight, Tensor)
        else input.graph.constant(np.asarray(weight), input.dtype)
    )
    if shape is not None and w.shape != shape:
        raise ShapeError(
            f"{name}: weight must have shape {list(shape)} (one per class), got {list(w.shape)}"
        )
    return _like(name, "weight", w, input, same_shape=False)


# -- regression ------------------------------------------------------------------------------------
def mse_loss(input: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Mean squared error: ``(input - target)**2``.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(mse_loss(x, y, "sum"), {"x": np.array([1.0, 2.0]), "y": np.zeros(2)})[0]
    array(5., dtype=float32)
    """
    _float_input("mse_loss", "input", input)
    _check_reduction("mse_loss", reduction)
    d = input - _like("mse_loss", "target", target, input)
    return reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Mean absolute error: ``|input - target|``."""
    _float_input("l1_loss", "input", input)
    _check_reduction("l1_loss", reduction)
    return reduce((input - _like("l1_loss", "target", target, input)).abs(), reduction)


def smooth_l1_loss(
    input: Tensor, target: Tensor, reduction: Reduction = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``.

    ``d = input - target``.

    ``beta = 0`` is the L1 loss.
    """
    _float_input("smooth_l1_loss", "input", input)
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    z = (input - _like("smooth_l1_loss", "target", target, input)).abs()
    if beta == 0:
        return reduce(z, reduction)
    return reduce(where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta), reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: Reduction = "mean", delta: float = 1.0
) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``.

    Equal to ``delta * smooth_l1_loss(beta=delta)``.
    """
    _float_input("huber_loss", "input", input)
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    z = (input - _like("huber_loss", "target", target, input)).abs()
    return reduce(where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta), reduction)


# -- classification --------------------------------------------------------------------------------
def _class_axis(name: str, input: Tensor, axis: int) -> int:
    if input.ndim < 1:
        raise ShapeError(f"{name}: input must have a class axis, got a scalar")
    if not -input.ndim <= axis < input.ndim:
        raise ShapeError(f"{name}: axis {axis} is out of range for input {list(input.shape)}")
    return axis % input.ndim


def _index_targets(name: str, logp: Tensor, target: Tensor, axis: int) -> None:
    expected = logp.shape[:axis] + logp.shape[axis + 1 :]
    if target.shape != expected:
        raise ShapeError(
            f"{name}: input {list(logp.shape)} (classes on axis {axis}) needs integer"
            f" targets of shape {list(expected)}, got {list(target.shape)}"
        )


def _move_classes_last(t: Tensor, axis: int) -> Tensor:
    if axis == t.ndim - 1:
        return t
    perm = [i for i in range(t.ndim) if i != axis] + [axis]
    return t.transpose(*perm)


def _nll(
    name: str,
    logp: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: int | None,
    reduction: str,
    axis: int,
    label_smoothing: float = 0.0,
) -> Tensor:
    """PyTorch's nll_loss (and cross-entropy's label smoothing) on log-probabilities."""
    n_classes = logp.shape[axis]
    logp_last = _move_classes_last(logp, axis)
    onehot = target.one_hot(n_classes, logp.dtype)  # all-zero rows for out-of-range labels
    w_onehot = onehot if weight is None else onehot * weight
    picked = -(logp_last * w_onehot).sum(axis=-1)  # -w[y] * logp[y]
    mask: Tensor | None = None
    if ignore_index is not None:
        mask = (target != ignore_index).cast(logp.dtype)
        picked = picked * mask
    loss = picked
    if label_smoothing > 0.0:
        smooth = -(logp_last if weight is None else logp_last * weight).sum(axis=-1)
        if mask is not None:
            smooth = smooth * mask
        loss = picked * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    # mean: divided by the total weight of the counted targets, as PyTorch
    if weight is None and mask is None:
        return loss.mean()
    if weight is None:
        assert mask is not None
        return loss.sum() / mask.sum()
    w_target = w_onehot.sum(axis=-1)
    if mask is not None:
        w_target = w_target * mask
    return loss.sum() / w_target.sum()


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Weight = None,
    ignore_index: int | None = None,
    reduction: Reduction = "mean",
    axis: int = -1,
) -> Tensor:
    """Negative log-likelihood of integer ``target`` under log-probabilities ``input``.

    ``input`` holds log-probabilities with the classes on ``axis`` (default the last,
    so ``(N, C)`` or ``(N, T, C)``; PyTorch's ``(N, C, d1, ...)`` layout is
    ``axis=1``); ``target`` has input's shape without that axis. ``weight`` (one per
    class) scales each sample's loss, and a ``"mean"`` divides by the total weight of
    the targets. Targets equal to ``ignore_index`` count for nothing (PyTorch's default
    is -100; here it is off unless given).
    """
    _float_input("nll_loss", "input", input)
    _check_reduction("nll_loss", reduction)
    if not is_int(target.dtype):
        raise DTypeError(f"nll_loss: target must hold integer class labels, got {target.dtype}")
    ax = _class_axis("nll_loss", input, axis)
    _index_targets("nll_loss", input, target, ax)
    w = _weight("nll_loss", weight, input, (input.shape[ax],))
    return _nll("nll_loss", input, target, w, ignore_index, reduction, ax)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Weight = None,
    ignore_index: int | None = None,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    axis: int = -1,
) -> Tensor:
    """Cross-entropy of logits ``input`` against class labels or class probabilities.

    ``input`` holds unnormalised logits with the classes on ``axis`` (default the last;
    PyTorch's ``(N, C, d1, ...)`` layout is ``axis=1``). ``target`` is either

    * integer labels shaped like ``input`` without the class axis, or
    * probabilities (float, the same shape as ``input``).

    ``label_smoothing`` ``e`` mixes the target with the uniform distribution:
    ``(1 - e) * nll + e / C * sum_c(-w_c * log p_c)``. ``weight`` (one per class) and
    ``ignore_index`` (labels only) act as in :func:`nll_loss`; with probability targets
    a ``"mean"`` divides by the number of samples. Computed through ``log_softmax``, so
    it is stable for large logits.
    """
    name = "cross_entropy"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    ax = _class_axis(name, input, axis)
    n_classes = input.shape[ax]
    w = _weight(name, weight, input, (n_classes,))
    logp = input.log_softmax(ax)
    if is_int(target.dtype):
        _index_targets(name, input, target, ax)
        return _nll(name, logp, target, w, ignore_index, reduction, ax, label_smoothing)
    if not is_float(target.dtype):
        raise DTypeError(
            f"{name}: target must be integer labels or float probabilities, got {target.dtype}"
        )
    if target.shape != input.shape:
        raise ShapeError(
            f"{name}: probability targets must have the logits' shape {list(input.shape)},"
            f" got {list(target.shape)}; integer labels have shape"
            f" {list(input.shape[:ax] + input.shape[ax + 1 :])}"
        )
    if ignore_index is not None:
        raise ValueError(f"{name}: ignore_index applies to integer labels only, not probabilities")
    probs = _like(name, "target", target, input)
    if label_smoothing > 0.0:
        probs = probs * (1.0 - label_smoothing) + label_smoothing / n_classes
    terms = logp * probs
    if w is not None:
        shape = [1] * input.ndim
        shape[ax] = n_classes
        terms = terms * w.reshape(*shape)
    per_sample = -terms.sum(axis=ax)
    return reduce(per_sample, reduction)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Weight = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """BCE on probabilities: ``-(t * log(p) + (1 - t) * log(1 - p))``, times ``weight``.

    As PyTorch, each log is clamped at -100, so ``p`` of exactly 0 or 1 gives a finite
    loss; prefer :func:`binary_cross_entropy_with_logits`, which is stable everywhere.
    ``weight`` broadcasts against the input.
    """
    name = "binary_cross_entropy"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    t = _like(name, "target", target, input)
    log_p = input.clamp(min=_LOG_FLOOR).log()
    log_q = (1.0 - input).clamp(min=_LOG_FLOOR).log()
    loss = -(t * log_p + (1.0 - t) * log_q)
    w = _weight(name, weight, input)
    return reduce(loss if w is None else loss * w, reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Weight = None,
    reduction: Reduction = "mean",
    pos_weight: Weight = None,
) -> Tensor:
    """BCE on logits: ``(1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``.

    Stable for any magnitude of ``x``. ``pos_weight`` (broadcast against the input,
    usually one per class on the last axis) weighs the positive term; ``weight``
    rescales each element's loss.
    """
    name = "binary_cross_entropy_with_logits"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    t = _like(name, "target", target, input)
    x = input
    softplus_neg = (-x).softplus()  # -log(sigmoid(x)), stable
    pw = _weight(name, pos_weight, input)
    if pw is None:
        loss = (1.0 - t) * x + softplus_neg
    else:
        loss = (1.0 - t) * x + ((pw - 1.0) * t + 1.0) * softplus_neg
    w = _weight(name, weight, input)
    return reduce(loss if w is None else loss * w, reduction)


def sigmoid_focal_loss(
    inputs: Tensor,
    targets: Tensor,
    alpha: float = 0.25,
    gamma: float = 2.0,
    reduction: Reduction = "none",
) -> Tensor:
    """Focal loss (Lin et al., 2017) on logits, as ``torchvision.ops.sigmoid_focal_loss``.

    ``ce * (1 - p_t)**gamma``, times ``alpha_t = alpha * t + (1 - alpha) * (1 - t)``
    when ``alpha >= 0`` (a negative ``alpha`` turns the weighting off), where ``ce``
    is :func:`binary_cross_entropy_with_logits` per element and
    ``p_t = p * t + (1 - p) * (1 - t)``. As torchvision, the default reduction is
    ``"none"``.
    """
    name = "sigmoid_focal_loss"
    _float_input(name, "inputs", inputs)
    _check_reduction(name, reduction)
    if gamma < 0:
        raise ValueError(f"{name}: gamma must be >= 0, got {gamma}")
    t = _like(name, "targets", targets, inputs)
    p = inputs.sigmoid()
    ce = binary_cross_entropy_with_logits(inputs, t, reduction="none")
    one_minus_pt = 1.0 - (p * t + (1.0 - p) * (1.0 - t))
    if gamma == 0:
        loss = ce
    elif gamma == 1:
        loss = ce * one_minus_pt
    elif gamma == 2:
        loss = ce * (one_minus_pt * one_minus_pt)
    else:
        loss = ce * one_minus_pt**gamma
    if alpha >= 0:
        loss = loss * (t * alpha + (1.0 - t) * (1.0 - alpha))
    return reduce(loss, reduction)


def kl_div(
    input: Tensor,
    target: Tensor,
    reduction: KLReduction = "mean",
    log_target: bool = False,
) -> Tensor:
    """KL divergence ``target * (log(target) - input)`` with ``input`` log-probabilities.

    ``log_target=True`` means the target holds log-probabilities too:
    ``exp(target) * (target - input)``. Zero targets contribute 0. ``"batchmean"``
    divides the sum by the batch size (``input.shape[0]``), which is the true KL
    divergence per sample; ``"mean"`` divides by the number of elements, as PyTorch.
    """
    name = "kl_div"
    _float_input(name, "input", input)
    _check_reduction(name, reduction, ("mean", "sum", "none", "batchmean"))
    t = _like(name, "target", target, input)
    if log_target:
        loss = t.exp() * (t - input)
    else:
        positive = t > 0.0
        safe_t = where(positive, t, 1.0)  # log(1) = 0: no -inf, no NaN in gradients
        loss = t * safe_t.log() - t * input
    if reduction == "batchmean":
        if loss.ndim == 0:
            return loss
        per_sample = loss.sum(axis=tuple(range(1, loss.ndim))) if loss.ndim > 1 else loss
        return per_sample.mean()
    return reduce(loss, reduction)


# -- margins and embeddings ------------------------------------------------------------------------
def _sign_target(name: str, target: Tensor, input: Tensor) -> Tensor:
    if not isinstance(target, Tensor):
        raise TypeError(f"{name}: target must be a Tensor of 1 and -1, got {type(target).__name__}")
    if target.dtype == "bool":
        raise DTypeError(
            f"{name}: target must hold 1 and -1, got bool; map it with where(t, 1, -1)"
        )
    return _like(name, "target", target, input, same_shape=False)


def hinge_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """Binary hinge loss ``max(0, margin - target * input)`` with targets of 1 and -1.

    The loss of a linear SVM (Keras' ``hinge``, elementwise here): ``input`` is a raw
    score, ``target`` holds +1/-1 (integer or float) and has ``input``'s shape. For
    the multi-class hinge see :func:`multi_margin_loss`; for PyTorch's
    ``hinge_embedding_loss`` (distances, not scores) see :func:`hinge_embedding_loss`.
    """
    name = "hinge_loss"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    _like(name, "target", t, input)
    return reduce((margin - t * input).relu(), reduction)


def squared_hinge_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """``max(0, margin - target * input)**2`` with targets of 1 and -1 (see :func:`hinge_loss`)."""
    name = "squared_hinge_loss"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    _like(name, "target", t, input)
    h = (margin - t * input).relu()
    return reduce(h * h, reduction)


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: Reduction = "mean"
) -> Tensor:
    """PyTorch's ``hinge_embedding_loss``: ``x`` where target is 1, ``max(0, margin - x)`` where -1.

    ``input`` is usually a distance between two embeddings.
    """
    name = "hinge_embedding_loss"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    t = _sign_target(name, target, input)
    _like(name, "target", t, input)
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
    """
    name = "multi_margin_loss"
    _float_input(name, "input", input)
    _check_reduction(name, reduction)
    if p not in (1, 2):
        raise ValueError(f"{name}: p must be 1 or 2, got {p}")
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
    w = _weight(name, weight, input, (n_classes,))
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
    """
    name = "cosine_embedding_loss"
    _float_input(name, "input1", input1)
    _check_reduction(name, reduction)
    x2 = _like(name, "input2", input2, input1)
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
    """
    name = "triplet_margin_loss"
    _float_input(name, "anchor", anchor)
    _check_reduction(name, reduction)
    if p <= 0:
        raise ValueError(f"{name}: p must be > 0, got {p}")
    pos = _like(name, "positive", positive, anchor)
    neg = _like(name, "negative", negative, anchor)
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
    """``max(0, -target * (input1 - input2) + margin)`` with targets of 1 and -1."""
    name = "margin_ranking_loss"
    _float_input(name, "input1", input1)
    _check_reduction(name, reduction)
    x2 = _like(name, "input2", input2, input1)
    t = _sign_target(name, target, input1)
    _like(name, "target", t, input1)
    return reduce((-t * (input1 - x2) + margin).relu(), reduction)
