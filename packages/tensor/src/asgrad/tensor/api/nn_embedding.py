"""``embedding`` with PyTorch's options: ``padding_idx`` and ``max_norm``.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.tensor.api.nn_embedding import embedding
>>> g = Graph()
>>> ids = g.input("ids", (3,), "int64")
>>> table = g.constant(np.array([[3.0, 4.0], [0.3, 0.4]], np.float32))
>>> print(evaluate([embedding(ids, table, max_norm=1.0)], {"ids": [0, 1, 0]})[0].round(4))
[[0.6 0.8]
 [0.3 0.4]
 [0.6 0.8]]
"""

from __future__ import annotations

from asgrad.tensor.api.functional import where
from asgrad.tensor.api.nn_functional import embedding as _lookup
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.common import int_arg

__all__ = ["embedding"]


def embedding(
    input: Tensor,  # PyTorch's argument name
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) at the integer ids ``input``.

    ``padding_idx``: the positions holding that id pass no gradient to the table (its
    row stays as it is; ``nn.Embedding`` starts it at zeros). ``max_norm``: each row
    looked up is scaled to that ``norm_type``-norm when it is longer, with the
    gradient of the plain lookup, as PyTorch computes it; unlike PyTorch, the stored
    table is not rewritten, so the optimizer updates the unscaled row. ``sparse`` is
    accepted and has no effect (gradients are dense); ``scale_grad_by_freq`` is not
    supported.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_embedding import embedding
    >>> g = Graph()
    >>> ids, table = g.constant([2, 0]), g.constant([[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]])
    >>> evaluate(embedding(ids, table))[0].tolist()
    [[2.0, 4.0], [0.0, 0.0]]
    """
    if scale_grad_by_freq:
        raise ArgumentError("embedding: scale_grad_by_freq=True is not supported")
    out = _lookup(input, weight)
    if max_norm is not None:
        norm = out.abs() ** norm_type if norm_type != 2.0 else out * out
        length = norm.sum(axis=-1, keepdims=True) ** (1.0 / norm_type)
        scale = where(length > max_norm, max_norm / (length + 1e-7), 1.0)
        out = out + (out * scale - out).detach()  # the value scaled, the gradient plain
    if padding_idx is not None:
        rows = weight.shape[0]
        index = int_arg(padding_idx, "padding_idx")
        if not -rows <= index < rows:
            raise ArgumentError(f"padding_idx {index} is outside the {rows} rows of the table")
        keep = (input != (index % rows)).expand_dims(-1)
        out = where(keep, out, out.detach())
    return out
