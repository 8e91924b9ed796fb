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
    """``|input - target|``, reduced ([`l1_loss`][asgrad.nn.losses.l1_loss]).

    >>> from asgrad.nn import L1Loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(L1Loss()(x, y), {"x": [1.0, 2.0], "y": [0.0, 4.0]})[0].tolist()
    1.5
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return l1_loss(input, target, self.reduction)


class MSELoss(_Loss):
    """``(input - target)**2``, reduced ([`mse_loss`][asgrad.nn.losses.mse_loss]).

    >>> from asgrad.nn import MSELoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(MSELoss()(x, y), {"x": [1.0, 2.0], "y": [0.0, 4.0]})[0].tolist()
    2.5
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return mse_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """[`smooth_l1_loss`][asgrad.nn.losses.smooth_l1_loss] with ``beta``.

    >>> from asgrad.nn import SmoothL1Loss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(SmoothL1Loss(beta=1.0)(x, y), {"x": [0.5, 3.0], "y": [0.0, 0.0]})[0].tolist()
    1.3125
    """

    def __init__(self, reduction: Reduction = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """[`huber_loss`][asgrad.nn.losses.huber_loss] with ``delta``.

    >>> from asgrad.nn import HuberLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (2,)), g.input("y", (2,))
    >>> evaluate(HuberLoss(delta=2.0)(x, y), {"x": [1.0, 4.0], "y": [0.0, 0.0]})[0].tolist()
    3.25
    """

    def __init__(self, reduction: Reduction = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return huber_loss(input, target, self.reduction, self.delta)


class NLLLoss(_Loss):
    """Negative log-likelihood of class labels under log-probabilities, classes on axis 1
    ([`nll_loss`][asgrad.nn.losses.nll_loss]); labels equal to ``ignore_index`` (-100)
    count for nothing.

    >>> from asgrad.nn import NLLLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> logp, label = g.input("logp", (2, 3)), g.input("label", (2,), "int64")
    >>> feeds = {"logp": [[-1.0, -2.0, -3.0], [-0.5, -1.5, -2.5]], "label": [0, 2]}
    >>> evaluate(NLLLoss()(logp, label), feeds)[0].tolist()
    1.75
    """

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
    ``weight``, ``ignore_index`` (-100) and ``label_smoothing``.

    >>> from asgrad.nn import CrossEntropyLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> logits, label = g.input("logits", (1, 2)), g.input("label", (1,), "int64")
    >>> loss = CrossEntropyLoss()(logits, label)
    >>> round(float(evaluate(loss, {"logits": [[0.0, 0.0]], "label": [1]})[0]), 4)
    0.6931
    """

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
    ([`binary_cross_entropy`][asgrad.nn.losses.binary_cross_entropy]).

    >>> from asgrad.nn import BCELoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> p, y = g.input("p", (2,)), g.input("y", (2,))
    >>> round(float(evaluate(BCELoss()(p, y), {"p": [0.5, 0.5], "y": [1.0, 0.0]})[0]), 4)
    0.6931
    """

    def __init__(self, weight: Weight = None, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits, stable for any logit
    ([`binary_cross_entropy_with_logits`][asgrad.nn.losses.binary_cross_entropy_with_logits]).

    >>> from asgrad.nn import BCEWithLogitsLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> z, y = g.input("z", (2,)), g.input("y", (2,))
    >>> loss = BCEWithLogitsLoss()(z, y)
    >>> round(float(evaluate(loss, {"z": [0.0, 0.0], "y": [1.0, 0.0]})[0]), 4)
    0.6931
    """

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
    ([`kl_div`][asgrad.nn.losses.kl_div]); ``reduction="batchmean"`` is the true KL.

    >>> from asgrad.nn import KLDivLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> logp, q = g.input("logp", (1, 2)), g.input("q", (1, 2))
    >>> loss = KLDivLoss(reduction="batchmean")(logp, q)
    >>> feeds = {"logp": [[-0.6931472, -0.6931472]], "q": [[0.5, 0.5]]}
    >>> round(float(evaluate(loss, feeds)[0]), 4)
    0.0
    """

    def __init__(self, reduction: KLReduction = "mean", log_target: bool = False) -> None:
        super().__init__()
        self.reduction: KLReduction = reduction
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return kl_div(input, target, self.reduction, self.log_target)


class MarginRankingLoss(_Loss):
    """``max(0, -target * (input1 - input2) + margin)``
    ([`margin_ranking_loss`][asgrad.nn.losses.margin_ranking_loss]).

    >>> from asgrad.nn import MarginRankingLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, b, y = g.input("a", (2,)), g.input("b", (2,)), g.input("y", (2,))
    >>> feeds = {"a": [1.0, 0.0], "b": [0.0, 1.0], "y": [1.0, 1.0]}
    >>> evaluate(MarginRankingLoss()(a, b, y), feeds)[0].tolist()
    0.5
    """

    def __init__(self, margin: float = 0.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Loss):
    """[`hinge_embedding_loss`][asgrad.nn.losses.hinge_embedding_loss] with ``margin``.

    >>> from asgrad.nn import HingeEmbeddingLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> d, y = g.input("d", (2,)), g.input("y", (2,))
    >>> evaluate(HingeEmbeddingLoss()(d, y), {"d": [0.5, 0.25], "y": [1.0, -1.0]})[0].tolist()
    0.625
    """

    def __init__(self, margin: float = 1.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return hinge_embedding_loss(input, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_Loss):
    """[`cosine_embedding_loss`][asgrad.nn.losses.cosine_embedding_loss] with ``margin``.

    >>> from asgrad.nn import CosineEmbeddingLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, b, y = g.input("a", (1, 2)), g.input("b", (1, 2)), g.input("y", (1,))
    >>> feeds = {"a": [[1.0, 0.0]], "b": [[0.0, 1.0]], "y": [1.0]}
    >>> evaluate(CosineEmbeddingLoss()(a, b, y), feeds)[0].tolist()
    1.0
    """

    def __init__(self, margin: float = 0.0, reduction: Reduction = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class MultiMarginLoss(_Loss):
    """[`multi_margin_loss`][asgrad.nn.losses.multi_margin_loss] with ``p``, ``margin``
    and ``weight``.

    >>> from asgrad.nn import MultiMarginLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> x, y = g.input("x", (1, 2)), g.input("y", (1,), "int64")
    >>> evaluate(MultiMarginLoss()(x, y), {"x": [[0.0, 0.0]], "y": [0]})[0].tolist()
    0.5
    """

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
    ``p``, ``eps`` and ``swap``.

    >>> from asgrad.nn import TripletMarginLoss
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, p, n = (g.input(name, (1, 2)) for name in "apn")
    >>> feeds = {"a": [[0.0, 0.0]], "p": [[0.0, 0.0]], "n": [[3.0, 4.0]]}
    >>> round(float(evaluate(TripletMarginLoss(margin=1.0)(a, p, n), feeds)[0]), 4)
    0.0
    """

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
