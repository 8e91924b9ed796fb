"""PyTorch's ``torch.nn.functional`` in asgrad: ``import asgrad.nn.functional as F``.

One namespace for the functions that ``asgrad.tensor`` and ``asgrad.nn`` define by
topic: activations (:mod:`asgrad.tensor.nn_activation`), convolution, pooling,
normalisation, dropout and embeddings (:mod:`asgrad.tensor.nn_functional`) and the
losses (:mod:`asgrad.nn.losses`), with PyTorch's names and argument names.

>>> import asgrad.nn.functional as F
>>> from asgrad.tensor import Graph
>>> x = Graph().input("x", (2, 3, 8, 8))
>>> F.max_pool2d(F.hardswish(x), 2).shape
(2, 3, 4, 4)
"""

from __future__ import annotations

from asgrad.nn.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    nll_loss,
    smooth_l1_loss,
    triplet_margin_loss,
)
from asgrad.tensor.functional import one_hot
from asgrad.tensor.nn_activation import (
    celu,
    elu,
    gelu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
)
from asgrad.tensor.nn_functional import (
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv2d,
    conv_transpose2d,
    dropout,
    embedding,
    layer_norm,
    max_pool2d,
)
from asgrad.tensor.nn_norms import (
    cosine_similarity,
    group_norm,
    instance_norm,
    normalize,
    pairwise_distance,
    rms_norm,
)

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv2d",
    "conv_transpose2d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "glu",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "log_softmax",
    "logsigmoid",
    "margin_ranking_loss",
    "max_pool2d",
    "mish",
    "mse_loss",
    "multi_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pairwise_distance",
    "prelu",
    "relu",
    "relu6",
    "rms_norm",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "triplet_margin_loss",
]
