"""Loss modules in PyTorch's names (``nn.CrossEntropyLoss()``, ``nn.MSELoss()``...).

Each holds its constructor's arguments and calls the loss function of
[`asgrad.nn.losses`][asgrad.nn.losses] in ``forward``, with PyTorch's defaults and layout:
the classification losses take the classes on axis 1 (``(N, C)`` or ``(N, C, d1, ...)``,
or axis 0 for one unbatched sample), and ``ignore_index`` is -100.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> logits, labels = g.input("logits", (2, 3)), g.input("labels", (2,), "int64")
>>> loss = CrossEntropyLoss(label_smoothing=0.1)(logits, labels)
>>> x = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
>>> round(float(evaluate(loss, {"logits": x, "labels": np.array([0, -100])})[0]), 4)
0.3729
"""

from __future__ import annotations

from asgrad.nn.losses.classification import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    nll_loss,
)
from asgrad.nn.losses.common import KLReduction, Reduction, Weight
from asgrad.nn.losses.margin import (
    cosine_embedding_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    triplet_margin_loss,
)
from asgrad.nn.losses.regression import huber_loss, l1_loss, mse_loss, smooth_l1_loss
from asgrad.nn.module import Module
from asgrad.tensor import Tensor

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CosineEmbeddingLoss",
    "CrossEntropyLoss",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "MarginRankingLoss",
    "MultiMarginLoss",
    "NLLLoss",
    "SmoothL1Loss",
    "TripletMarginLoss",
]


class _Loss(Module):
    def __init__(self, reduction: Reduction = "mean") -> None:
        super().__init__()
        self.reduction: Reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class L1Loss(_Loss):
    """``|input - target|``, reduced ([`l1_loss`][asgrad.nn.losses.l1_loss])."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return l1_loss(input, target, self.reduction)


class MSELoss(_Loss):
    """``(input - target)**2``, reduced ([`mse_loss`][asgrad.nn.losses.mse_loss])."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return mse_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """[`smooth_l1_loss`][asgrad.nn.losses.smooth_l1_loss] with ``beta``."""

    def __init__(self, reduction: Reduction = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """[`huber_loss`][asgrad.nn.losses.huber_loss] with ``delta``."""

    def __init__(self, reduction: Reduction = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return huber_loss(input, target, self.reduction, self.delta)


class NLLLoss(_Loss):
    """Negative log-likelihood of class labels under log-probabilities, classes on axis 1
    ([`nll_loss`][asgrad.nn.losses.nll_loss]); labels equal to ``ignore_index`` (-100)
    count for nothing."""

    def __init__(
        self, weight: Weight = None, ignore_index: int = -100, reduction: Reduction = "mean"
    ) -> None:
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross-entropy of logits (classes on axis 1) against class labels or class
    probabilities ([`cross_entropy`][asgrad.nn.losses.cross_entropy]), with PyTorch's
    ``weight``, ``ignore_index`` (-100) and ``label_smoothing``."""

    def __init__(
        self,
        weight: Weight = None,
        ignore_index: int = -100,
        reduction: Reduction = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        labels = target.dtype.startswith(("int", "uint"))
        return cross_entropy(
            input,
            target,
            self.weight,
            self.ignore_index if labels else None,
            self.reduction,
            self.label_smoothing,
        )


class BCELoss(_Loss):
    """Binary cross-entropy on probabilities
    ([`binary_cross_entropy`][asgrad.nn.losses.binary_cross_entropy])."""

    def __init__(self, weight: Weight = None, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits, stable for any logit
    ([`binary_cross_entropy_with_logits`][asgrad.nn.losses.binary_cross_entropy_with_logits])."""

    def __init__(
        self, weight: Weight = None, reduction: Reduction = "mean", pos_weight: Weight = None
    ) -> None:
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy_with_logits(
            input, target, self.weight, self.reduction, self.pos_weight
        )


class KLDivLoss(Module):
    """KL divergence of log-probabilities ``input`` from ``target``
    ([`kl_div`][asgrad.nn.losses.kl_div]); ``reduction="batchmean"`` is the true KL."""

    def __init__(self, reduction: KLReduction = "mean", log_target: bool = False) -> None:
        super().__init__()
        self.reduction: KLReduction = reduction
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return kl_div(input, target, self.reduction, self.log_target)


class MarginRankingLoss(_Loss):
    """``max(0, -target * (input1 - input2) + margin)``
    ([`margin_ranking_loss`][asgrad.nn.losses.margin_ranking_loss])."""

    def __init__(self, margin: float = 0.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Loss):
    """[`hinge_embedding_loss`][asgrad.nn.losses.hinge_embedding_loss] with ``margin``."""

    def __init__(self, margin: float = 1.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return hinge_embedding_loss(input, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_Loss):
    """[`cosine_embedding_loss`][asgrad.nn.losses.cosine_embedding_loss] with ``margin``."""

    def __init__(self, margin: float = 0.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class MultiMarginLoss(_Loss):
    """[`multi_margin_loss`][asgrad.nn.losses.multi_margin_loss] with ``p``, ``margin``
    and ``weight``."""

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Weight = None,
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(reduction)
        self.p, self.margin, self.weight = p, margin, weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class TripletMarginLoss(_Loss):
    """[`triplet_margin_loss`][asgrad.nn.losses.triplet_margin_loss] with ``margin``,
    ``p``, ``eps`` and ``swap``."""

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        reduction: Reduction = "mean",
    ) -> None:
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_loss(
            anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction
        )
