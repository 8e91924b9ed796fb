"""``TransformerBlock``: a pre-norm transformer layer (attention, then feed-forward)."""

from __future__ import annotations

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers.attention import SelfAttention
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.feedforward import FeedForward
from asgrad.nn.layers.normalization import LayerNorm
from asgrad.nn.layers.positional import Offset
from asgrad.nn.module import Module
from asgrad.tensor import Tensor


class TransformerBlock(Module):
    """``x + drop(attn(ln1(x)))`` then ``x + drop(ff(ln2(x)))`` (pre-norm, as GPT-2).

    Equivalent to PyTorch's ``nn.TransformerEncoderLayer(d_model, nhead,
    dim_feedforward, dropout, activation, batch_first=True, norm_first=True)``.
    ``causal=True`` makes it a decoder block of a language model; ``position``
    (``"rope"`` or ``"alibi"``) is passed to the attention.

    >>> from asgrad.tensor import Graph
    >>> block = TransformerBlock(16, 4, causal=True, rng=0)
    >>> block(Graph().input("x", (2, 9, 16))).shape
    (2, 9, 16)
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        hidden_dim: int | None = None,
        dropout: float = 0.0,
        *,
        activation: str | Module = "gelu",
        causal: bool = False,
        position: str | None = None,
        max_len: int = 2048,
        eps: float = 1e-5,
        bias: bool = True,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.dim = dim
        self.ln1 = LayerNorm(dim, eps, dtype=dtype)
        self.attn = SelfAttention(
            dim,
            num_heads,
            dropout,
            bias,
            causal=causal,
            position=position,
            max_len=max_len,
            dtype=dtype,
            rng=rng,
        )
        self.drop1 = Dropout(dropout)
        self.ln2 = LayerNorm(dim, eps, dtype=dtype)
        self.ff = FeedForward(
            dim,
            hidden_dim,
            activation=activation,
            dropout=dropout,
            bias=bias,
            dtype=dtype,
            rng=rng,
        )
        self.drop2 = Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool | None = None,
        attn_bias: Tensor | None = None,
        offset: Offset = 0,
    ) -> Tensor:
        h = self.attn(
            self.ln1(x),
            key_padding_mask=key_padding_mask,
            causal=causal,
            attn_bias=attn_bias,
            offset=offset,
        )
        x = x + self.drop1(h)
        out: Tensor = x + self.drop2(self.ff(self.ln2(x)))
        return out

    def extra_repr(self) -> str:
        return f"{self.dim}, num_heads={self.attn.num_heads}"
