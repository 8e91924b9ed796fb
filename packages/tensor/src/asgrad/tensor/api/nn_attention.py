"""``scaled_dot_product_attention`` in PyTorch's functional form.

>>> from asgrad.tensor import Graph
>>> from asgrad.tensor.api.nn_attention import scaled_dot_product_attention
>>> g = Graph()
>>> q, k, v = g.input("q", (2, 4, 10, 8)), g.input("k", (2, 4, 12, 8)), g.input("v", (2, 4, 12, 8))
>>> scaled_dot_product_attention(q, k, v).shape
(2, 4, 10, 8)
"""

from __future__ import annotations

from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.registry import given_attrs

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool | None = None,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(q k^T * scale + mask) v`` with PyTorch's arguments: ``scale`` defaults
    to ``1 / sqrt(E)``; a bool ``attn_mask`` keeps its True positions, a float one is
    added; ``is_causal`` keeps key j <= query i. Attention dropout is not supported
    here (``dropout_p`` must be 0): apply ``dropout`` to the result's inputs instead.

    >>> from asgrad.tensor import Graph
    >>> from asgrad.tensor.api.nn_attention import scaled_dot_product_attention
    >>> g = Graph()
    >>> q, kv = g.input("q", (1, 2, 3, 8)), g.input("kv", (1, 2, 5, 8))
    >>> scaled_dot_product_attention(q, kv, kv).shape
    (1, 2, 3, 8)
    """
    if dropout_p:
        raise ArgumentError(
            "scaled_dot_product_attention: dropout_p must be 0 (attention dropout is not"
            " supported; asgrad.nn.SelfAttention applies dropout with a seed)"
        )
    if enable_gqa:
        raise ArgumentError("scaled_dot_product_attention: enable_gqa is not supported")
    inputs = (query, key, value) if attn_mask is None else (query, key, value, attn_mask)
    attrs = given_attrs(is_causal=is_causal, scale=scale)
    return query.graph.apply("scaled_dot_product_attention", inputs, attrs)
