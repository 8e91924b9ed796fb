"""``Embedding``: a lookup table of learned vectors, indexed by integer ids."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_embedding import embedding
from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import is_int


class Embedding(Module):
    """``weight[ids]``: maps integer ids of any shape to vectors of ``embedding_dim``.

    ``weight`` is ``(num_embeddings, embedding_dim)``, drawn from N(0, 1) as
    PyTorch's ``nn.Embedding`` draws it, or from N(0, ``std``**2) when ``std`` is
    given (``std=0.02`` is GPT-2's choice). Ids outside ``[0, num_embeddings)``
    raise when the graph runs. ``padding_idx`` and ``max_norm`` as PyTorch's (see
    [`asgrad.tensor.api.nn_embedding.embedding`][asgrad.tensor.api.nn_embedding.embedding]): the
    padding row starts at zeros and receives no gradient.

    >>> from asgrad.tensor import Graph
    >>> emb = Embedding(10, 4, rng=0)
    >>> emb(Graph().input("ids", (2, 3), "int64")).shape
    (2, 3, 4)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        *,
        std: float | None = None,
        weight_init: Callable[..., np.ndarray] | None = None,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        num_embeddings = positive_int(num_embeddings, "Embedding", "num_embeddings")
        embedding_dim = positive_int(embedding_dim, "Embedding", "embedding_dim")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.std = std
        w_init = weight_init or functools.partial(init.normal, std=1.0 if std is None else std)
        self.weight = Parameter((num_embeddings, embedding_dim), w_init, dtype=dtype, rng=rng)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ShapeError(
                    f"Embedding: padding_idx {padding_idx} is outside the {num_embeddings} rows"
                )
            padding_idx %= num_embeddings
            self.weight.value[padding_idx] = 0.0  # PyTorch starts the padding row at zeros
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse

    def forward(self, ids: Tensor) -> Tensor:
        if not is_int(ids.dtype):
            raise DTypeError(
                f"Embedding({self.num_embeddings}, {self.embedding_dim}) takes integer ids,"
                f" got {ids.dtype}{list(ids.shape)}; declare the input with dtype 'int64'"
            )
        return embedding(
            ids,
            ids.graph.bind(self.weight),
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )

    def extra_repr(self) -> str:
        std = "" if self.std is None else f", std={self.std}"
        return f"{self.num_embeddings}, {self.embedding_dim}{std}"
