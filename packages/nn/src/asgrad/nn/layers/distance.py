"""Distance modules, in PyTorch's names: ``CosineSimilarity`` and ``PairwiseDistance``.

The functions in [`asgrad.tensor.api.nn_norms`][asgrad.tensor.api.nn_norms] do the work.
"""

from __future__ import annotations

from asgrad.nn.module import Module
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_norms import cosine_similarity, pairwise_distance


class CosineSimilarity(Module):
    """The cosine similarity of two inputs along ``dim``.

    >>> from asgrad.nn import CosineSimilarity
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, b = g.constant([[1.0, 0.0]]), g.constant([[2.0, 0.0]])
    >>> evaluate(CosineSimilarity()(a, b))[0].tolist()
    [1.0]
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` along the last axis.

    >>> from asgrad.nn import PairwiseDistance
    >>> from asgrad.tensor import Graph, evaluate
    >>> g = Graph()
    >>> a, b = g.constant([[0.0, 0.0]]), g.constant([[3.0, 4.0]])
    >>> evaluate(PairwiseDistance()(a, b))[0].tolist()
    [4.99999...]
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
