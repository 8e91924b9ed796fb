"""``SelfAttention``: asgrad's own multi-head attention, for its transformer blocks.

It attends a sequence to itself unless given keys and values, returns the output alone,
and applies RoPE or ALiBi positions itself; PyTorch's ``nn.MultiheadAttention``, with
its signature, layouts and parameter names, is [`MultiheadAttention`][asgrad.nn.MultiheadAttention].

Inputs are batch-first ``(B, T, E)``. The batch axis is never baked into the graph
(reshapes use ``-1`` for it), so one traced graph runs on any batch size; a new
sequence length needs a new trace, as it changes the masks' shapes.
"""

from __future__ import annotations

import math

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.linear import Linear
from asgrad.nn.layers.positional import ALiBi, Offset, RoPE
from asgrad.nn.module import Module
from asgrad.tensor import Tensor, where
from asgrad.tensor.errors import ArgumentError, DTypeError, ShapeError

# Masked scores: finite, so that a fully masked row gives uniform weights, not NaN.
MASKED = -1e9


class SelfAttention(Module):
    """Multi-head self-attention (Vaswani et al., 2017), batch-first, with RoPE or ALiBi.

    Without positions it computes what PyTorch's ``nn.MultiheadAttention(batch_first=True)``
    computes, but returns only the output, takes ``causal`` and ``position`` in the
    constructor, and keeps its input projection in a ``Linear``: ``in_proj`` is one
    ``Linear(E, 3E)`` producing queries, keys and values (in that order along its output
    axis), ``out_proj`` a ``Linear(E, E)``; both have PyTorch's ``nn.Linear``
    initialisation. ``dropout`` applies to the attention
    weights in training mode.

    ``forward(query, key=None, value=None, *, key_padding_mask=None, causal=None,
    attn_bias=None, offset=0)``:

    - ``query`` is ``(B, Tq, E)``; ``key``/``value`` ``(B, Tk, E)`` for cross-attention
      (self-attention when omitted);
    - ``key_padding_mask`` is a bool ``(B, Tk)`` tensor, True where a key is padding;
    - ``causal`` (default: the constructor's) stops a query from attending to later
      keys (query ``i`` sits at key position ``i + Tk - Tq``);
    - ``attn_bias`` is added to the scores, broadcast to ``(B, H, Tq, Tk)``;
    - ``position="rope"`` rotates queries and keys per head (``offset`` is the
      position of the first query and key); ``position="alibi"`` adds ALiBi biases.

    >>> from asgrad.tensor import Graph
    >>> mha = SelfAttention(16, 4, rng=0)
    >>> mha(Graph().input("x", (3, 7, 16)), causal=True).shape
    (3, 7, 16)
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        causal: bool = False,
        position: str | None = None,
        max_len: int = 2048,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        embed_dim = positive_int(embed_dim, "SelfAttention", "embed_dim")
        num_heads = positive_int(num_heads, "SelfAttention", "num_heads")
        if embed_dim % num_heads:
            raise ShapeError(
                f"SelfAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}"
            )
        if position not in (None, "rope", "alibi"):
            raise ArgumentError(f"position must be None, 'rope' or 'alibi', got {position!r}")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.causal = causal
        self.position = position
        self.in_proj = Linear(embed_dim, 3 * embed_dim, bias, dtype=dtype, rng=rng)
        self.out_proj = Linear(embed_dim, embed_dim, bias, dtype=dtype, rng=rng)
        self.attn_dropout = Dropout(dropout)
        self.rope: RoPE | None = RoPE(self.head_dim, max_len) if position == "rope" else None
        self.alibi: ALiBi | None = ALiBi(num_heads) if position == "alibi" else None

    # -- projections ---------------------------------------------------------------------
    def _project(self, x: Tensor, part: int) -> Tensor:
        """Queries (0), keys (1) or values (2) of ``x``, from a slice of ``in_proj``."""
        g = x.graph
        e = self.embed_dim
        y = x @ g.bind(self.in_proj.weight)[:, part * e : (part + 1) * e]
        if self.in_proj.bias is not None:
            y = y + g.bind(self.in_proj.bias)[part * e : (part + 1) * e]
        return y

    def _heads(self, x: Tensor) -> Tensor:
        """``(B, T, E)`` -> ``(B, H, T, D)``, the batch size left free."""
        return x.reshape(-1, x.shape[1], self.num_heads, self.head_dim).transpose(0, 2, 1, 3)

    def _check(self, name: str, x: Tensor) -> None:
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ShapeError(
                f"SelfAttention({self.embed_dim}, {self.num_heads}): {name} must be"
                f" (batch, seq, {self.embed_dim}), got shape {list(x.shape)}"
            )

    # -- forward -------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool | None = None,
        attn_bias: Tensor | None = None,
        offset: Offset = 0,
    ) -> Tensor:
        self._check("query", query)
        e = self.embed_dim
        if key is None and value is None:
            qkv = self.in_proj(query)
            q, k, v = qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
        else:
            key = query if key is None else key
            value = key if value is None else value
            self._check("key", key)
            self._check("value", value)
            if key.shape[1] != value.shape[1]:
                raise ShapeError(
                    f"SelfAttention: key {list(key.shape)} and value"
                    f" {list(value.shape)} must have the same sequence length"
                )
            q, k, v = self._project(query, 0), self._project(key, 1), self._project(value, 2)
        tq, tk = q.shape[1], k.shape[1]
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        if self.rope is not None:
            q, k = self.rope(q, offset), self.rope(k, offset)
        scores = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if self.alibi is not None:
            scores = self.alibi(scores)
        if attn_bias is not None:
            scores = scores + attn_bias.cast(scores.dtype)
        if self.causal if causal is None else causal:
            allowed = np.tril(np.ones((tq, tk), dtype=bool), k=tk - tq)
            scores = where(scores.graph.constant(allowed), scores, MASKED)
        if key_padding_mask is not None:
            scores = self._mask_padding(scores, key_padding_mask, tk)
        weights = self.attn_dropout(scores.softmax(axis=-1))
        out = (weights @ v).transpose(0, 2, 1, 3).reshape(-1, tq, e)
        result: Tensor = self.out_proj(out)
        return result

    def _mask_padding(self, scores: Tensor, mask: Tensor, tk: int) -> Tensor:
        if mask.dtype != "bool":
            raise DTypeError(
                f"key_padding_mask must be bool (True = padding), got {mask.dtype}; compare"
                f" with a pad id first (ids == pad_id)"
            )
        if mask.ndim != 2 or mask.shape[1] != tk:
            raise ShapeError(
                f"key_padding_mask must be (batch, {tk}) for keys of length {tk}, got"
                f" shape {list(mask.shape)}"
            )
        return where(mask.reshape(-1, 1, 1, tk), MASKED, scores)

    def extra_repr(self) -> str:
        extra = f", causal={self.causal}" if self.causal else ""
        extra += f", position={self.position!r}" if self.position else ""
        return (
            f"{self.embed_dim}, num_heads={self.num_heads}, dropout={self.attn_dropout.p},"
            f" bias={self.in_proj.bias is not None}{extra}"
        )
