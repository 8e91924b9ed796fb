"""Loss functions on symbolic tensors, with the names and semantics of ``torch.nn.functional``.

Every loss takes ``reduction="mean" | "sum" | "none"`` (``kl_div`` also
``"batchmean"``): ``"none"`` returns the per-element (or per-sample) losses,
``"sum"`` their sum and ``"mean"`` their mean, exactly as PyTorch. Means are
computed when the graph runs, so a batch of any size may be fed.

Losses are compositions of primitive ops (``log_softmax``, ``softplus``, ``where``,
``clamp``...), chosen for numerical stability: cross-entropy goes through
``log_softmax`` and the logit losses through ``softplus``, so large logits never
overflow. Gradients come from the primitives' rules.

One module per kind: `regression`,
`classification` and `margin`;
`common` holds the reduction and the argument checks.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> logits, labels = g.input("logits", (2, 3)), g.input("labels", (2,), "int64")
>>> loss = cross_entropy(logits, labels)
>>> x = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
>>> round(float(evaluate(loss, {"logits": x, "labels": np.array([0, 1])})[0]), 4)
0.6691
"""

from asgrad.nn.losses.classification import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    nll_loss,
    sigmoid_focal_loss,
)
from asgrad.nn.losses.common import KLReduction, Reduction, Weight, reduce
from asgrad.nn.losses.margin import (
    cosine_embedding_loss,
    hinge_embedding_loss,
    hinge_loss,
    margin_ranking_loss,
    multi_margin_loss,
    squared_hinge_loss,
    triplet_margin_loss,
)
from asgrad.nn.losses.regression import huber_loss, l1_loss, mse_loss, smooth_l1_loss

__all__ = [
    "KLReduction",
    "Reduction",
    "Weight",
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
