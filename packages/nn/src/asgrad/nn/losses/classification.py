"""Classification losses: negative log-likelihood, cross-entropy, binary, focal and KL.

Cross-entropy goes through ``log_softmax`` and the logit losses through ``softplus``,
so large logits never overflow.
"""

from __future__ import annotations

import numbers

from asgrad.nn.losses.common import (
    KLReduction,
    Reduction,
    Weight,
    check_float_input,
    check_reduction,
    like_input,
    reduce,
    weight_tensor,
)
from asgrad.tensor import Tensor, where
from asgrad.tensor.api.functional import stop_gradient
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import is_float, is_int

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "kl_div",
    "nll_loss",
    "sigmoid_focal_loss",
]

# PyTorch's binary_cross_entropy clamps its logs at -100 and has a backward of its own,
# (p - t) / max(p (1 - p), 1e-12): bounded, and where p (1 - p) < 1e-12 not the
# derivative of the clamped value (at p = 0, t = 1 the value is 100, the gradient -1e12).
_LOG_MIN = -100.0
_BCE_EPS = 1e-12


def _log(p: Tensor) -> Tensor:
    """``log p``, and -100 at 0: ``log(0)`` is never computed (no warning, no 0/0 in
    its gradient)."""
    nonzero = p != 0.0
    return where(nonzero, where(nonzero, p, 1.0).log(), _LOG_MIN)


def _bce_terms(p: Tensor, t: Tensor) -> Tensor:
    """PyTorch's binary cross-entropy per element: its value and its gradients."""
    log_p, log_q = _log(p), _log(1.0 - p)
    loss = -(t * log_p.clamp(min=_LOG_MIN) + (1.0 - t) * log_q.clamp(min=_LOG_MIN))
    # That is PyTorch's gradient where p (1 - p) >= 1e-12. Elsewhere the value stays, and
    # the gradients are PyTorch's: (p - t) / 1e-12 for p, log(1 - p) - log(p) for t
    # (100 at p = 0, -100 at p = 1, where PyTorch's is infinite), from a slope whose
    # value is taken away.
    slope = (p * p * 0.5 - stop_gradient(t) * p) / _BCE_EPS + t * stop_gradient(log_q - log_p)
    pinned = stop_gradient(loss) + (slope - stop_gradient(slope))
    return where(p * (1.0 - p) < _BCE_EPS, pinned, loss)


def _class_axis(name: str, input: Tensor, axis: int | None) -> int:
    """``axis`` normalized; None is PyTorch's class axis: 1 for a batch (``(N, C, ...)``),
    0 for one sample (``(C,)``)."""
    if input.ndim < 1:
        raise ShapeError(f"{name}: input must have a class axis, got a scalar")
    if axis is None:
        return 1 if input.ndim >= 2 else 0
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


def _label_value(name: str, ignore_index: object) -> int:
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise ArgumentTypeError(
            f"{name}: ignore_index must be an int (a label value), got {ignore_index!r}"
        )
    return int(ignore_index)


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
    mask: Tensor | None = None
    labels = target
    if ignore_index is not None:
        # Ignored labels become class 0 before one_hot sees them (it raises for a
        # label outside [0, C), as PyTorch does); the mask then zeroes their loss.
        kept = target != _label_value(name, ignore_index)
        labels = where(kept, target, target.graph.constant(0, target.dtype))
        mask = kept.cast(logp.dtype)
    onehot = labels.one_hot(n_classes, logp.dtype)
    w_onehot = onehot if weight is None else onehot * weight
    picked = -(logp_last * w_onehot).sum(axis=-1)  # -w[y] * logp[y]
    if mask is not None:
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
    ignore_index: int | None = -100,
    reduction: Reduction = "mean",
    axis: int | None = None,
) -> Tensor:
    """Negative log-likelihood of integer ``target`` under log-probabilities ``input``
    (``torch.nn.functional.nll_loss``, with its defaults).

    ``input`` holds log-probabilities with the classes on ``axis``; by default PyTorch's:
    axis 1 of ``(N, C)`` or ``(N, C, d1, ...)``, axis 0 of one sample ``(C,)`` (for
    ``(N, T, C)`` pass ``axis=-1``). ``target`` has input's shape without that axis.
    ``weight`` (one per class) scales each sample's loss, and a ``"mean"`` divides by the
    total weight of the counted targets. Targets equal to ``ignore_index`` (default -100;
    None for none) count for nothing. Any other target outside ``[0, C)``, ``-1``
    included, raises [`OutOfRangeError`][asgrad.tensor.OutOfRangeError] when the graph
    runs, as in PyTorch.

    >>> from asgrad.nn import nll_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> logp, y = g.constant([[-1.0, -2.0]]), g.constant([1])
    >>> round(float(evaluate(nll_loss(logp, y))[0]), 4)
    2.0
    """
    check_float_input("nll_loss", "input", input)
    check_reduction("nll_loss", reduction)
    if not is_int(target.dtype):
        raise DTypeError(f"nll_loss: target must hold integer class labels, got {target.dtype}")
    ax = _class_axis("nll_loss", input, axis)
    _index_targets("nll_loss", input, target, ax)
    w = weight_tensor("nll_loss", weight, input, (input.shape[ax],))
    return _nll("nll_loss", input, target, w, ignore_index, reduction, ax)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Weight = None,
    ignore_index: int | None = -100,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    axis: int | None = None,
) -> Tensor:
    """Cross-entropy of logits ``input`` against class labels or class probabilities
    (``torch.nn.functional.cross_entropy``, with its defaults).

    ``input`` holds unnormalised logits with the classes on ``axis``; by default PyTorch's:
    axis 1 of ``(N, C)`` or ``(N, C, d1, ...)``, axis 0 of one sample ``(C,)`` (for
    ``(N, T, C)`` pass ``axis=-1``). ``target`` is either

    * integer labels shaped like ``input`` without the class axis, or
    * probabilities (float, the same shape as ``input``).

    ``label_smoothing`` ``e`` mixes the target with the uniform distribution:
    ``(1 - e) * nll + e / C * sum_c(-w_c * log p_c)``. ``weight`` (one per class) and
    ``ignore_index`` (labels only; default -100) act as in
    [`nll_loss`][asgrad.nn.nll_loss]; with probability targets a ``"mean"`` divides by
    the number of samples. Computed through ``log_softmax``, so
    it is stable for large logits. Integer labels outside ``[0, C)`` that are not
    ``ignore_index`` raise [`OutOfRangeError`][asgrad.tensor.OutOfRangeError] when the
    graph runs.

    >>> from asgrad.nn import cross_entropy
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> logits, y = g.constant([[0.0, 0.0]]), g.constant([0])
    >>> round(float(evaluate(cross_entropy(logits, y))[0]), 4)
    0.6931
    """
    name = "cross_entropy"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    ax = _class_axis(name, input, axis)
    n_classes = input.shape[ax]
    w = weight_tensor(name, weight, input, (n_classes,))
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
    if ignore_index is not None and ignore_index != -100:
        raise ArgumentError(
            f"{name}: ignore_index applies to integer labels only, not probabilities"
        )
    probs = like_input(name, "target", target, input)
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
    loss (100 at ``p = 0, t = 1``), and the gradient is PyTorch's:
    ``(p - t) / max(p (1 - p), 1e-12)`` for the input (-1e12 at ``p = 0, t = 1``, where
    the clamped value is flat) and ``log(1 - p) - log(p)`` for the target (100 at
    ``p = 0`` and -100 at 1, where PyTorch's is infinite). Prefer
    [`binary_cross_entropy_with_logits`][asgrad.nn.binary_cross_entropy_with_logits], which is
    stable everywhere. ``weight`` broadcasts against the input.

    >>> from asgrad.nn import binary_cross_entropy
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> p, t = g.constant([0.5]), g.constant([1.0])
    >>> round(float(evaluate(binary_cross_entropy(p, t))[0]), 4)
    0.6931
    """
    name = "binary_cross_entropy"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    t = like_input(name, "target", target, input)
    loss = _bce_terms(input, t)
    w = weight_tensor(name, weight, input)
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

    >>> from asgrad.nn import binary_cross_entropy_with_logits
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, t = g.constant([0.0]), g.constant([1.0])
    >>> round(float(evaluate(binary_cross_entropy_with_logits(x, t))[0]), 4)
    0.6931
    """
    name = "binary_cross_entropy_with_logits"
    check_float_input(name, "input", input)
    check_reduction(name, reduction)
    t = like_input(name, "target", target, input)
    x = input
    softplus_neg = (-x).softplus()  # -log(sigmoid(x)), stable
    pw = weight_tensor(name, pos_weight, input)
    if pw is None:
        loss = (1.0 - t) * x + softplus_neg
    else:
        loss = (1.0 - t) * x + ((pw - 1.0) * t + 1.0) * softplus_neg
    w = weight_tensor(name, weight, input)
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
    is [`binary_cross_entropy_with_logits`][asgrad.nn.binary_cross_entropy_with_logits] per element
    and ``p_t = p * t + (1 - p) * (1 - t)``. As torchvision, the default reduction is
    ``"none"``.

    >>> from asgrad.nn import sigmoid_focal_loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, t = g.constant([0.0]), g.constant([1.0])
    >>> round(float(evaluate(sigmoid_focal_loss(x, t, reduction="sum"))[0]), 4)
    0.0433
    """
    name = "sigmoid_focal_loss"
    check_float_input(name, "inputs", inputs)
    check_reduction(name, reduction)
    if gamma < 0:
        raise ArgumentError(f"{name}: gamma must be >= 0, got {gamma}")
    t = like_input(name, "targets", targets, inputs)
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

    >>> from asgrad.nn import kl_div
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> import numpy as np
    >>> log_q, p = g.constant(np.log([[0.5, 0.5]])), g.constant([[1.0, 0.0]])
    >>> round(float(evaluate(kl_div(log_q, p, reduction="sum"))[0]), 4)
    0.6931
    """
    name = "kl_div"
    check_float_input(name, "input", input)
    check_reduction(name, reduction, ("mean", "sum", "none", "batchmean"))
    t = like_input(name, "target", target, input)
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
