"""PyTorch's transformer modules, with PyTorch's signatures, names and defaults.

``TransformerEncoderLayer``, ``TransformerEncoder``, ``TransformerDecoderLayer``,
``TransformerDecoder`` and ``Transformer`` as in ``torch.nn``: post-norm unless
``norm_first=True``, sequence-first ``(S, N, E)`` unless ``batch_first=True``,
``dim_feedforward=2048``, ``dropout=0.1``, ``activation`` ``"relu"`` (or
``"gelu"``, or a module), ``src_mask`` / ``src_key_padding_mask`` / ``is_causal``,
and attribute names that make ``load_torch_state_dict`` take a PyTorch checkpoint
(``self_attn.in_proj_weight``, ``linear1.weight``, ``norm1.weight``...).
asgrad's own [`TransformerBlock`][asgrad.nn.TransformerBlock] (pre-norm, batch-first, RoPE or
ALiBi) stays as it is.

As in PyTorch, the stacks hold ``num_layers`` copies of the layer given, which
start from the same values; each copy's dropout draws its own masks.
"""

from __future__ import annotations

import copy

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers.container import ModuleList
from asgrad.nn.layers.dropout import _SEEDS, Dropout
from asgrad.nn.layers.feedforward import make_activation
from asgrad.nn.layers.linear import Linear
from asgrad.nn.layers.normalization import LayerNorm
from asgrad.nn.layers.torch_attention import (
    Mask,
    MultiheadAttention,
    as_mask,
    check_torch_options,
)
from asgrad.nn.module import Module
from asgrad.tensor import Tensor


def _rng(rng: init.RNG) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


class _Layer(Module):
    """What the encoder and decoder layers share: the feed-forward block and options."""

    def _common(
        self,
        d_model: int,
        dim_feedforward: int,
        dropout: float,
        activation: str | Module,
        layer_norm_eps: float,
        batch_first: bool,
        norm_first: bool,
        bias: bool,
        dtype: str,
        rng: np.random.Generator,
    ) -> None:
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype, rng=rng)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype, rng=rng)
        self.norm_first = norm_first
        self.batch_first = batch_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = make_activation(activation)

    def _ff(self, x: Tensor, drop: Dropout) -> Tensor:
        out: Tensor = drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        return out


class TransformerEncoderLayer(_Layer):
    """Self-attention then feed-forward, each with a residual and a layer norm.

    Post-norm ``x = norm1(x + sa(x)); x = norm2(x + ff(x))`` by default (PyTorch's),
    pre-norm ``x = x + sa(norm1(x)); x = x + ff(norm2(x))`` with ``norm_first``.

    >>> from asgrad.tensor import Graph
    >>> layer = TransformerEncoderLayer(16, 4, dim_feedforward=32, rng=0)
    >>> layer(Graph().input("src", (9, 2, 16), free=(1,))).shape
    (9, 2, 16)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Module = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: object = None,
        dtype: str | None = None,
        *,
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        check_torch_options("TransformerEncoderLayer", device)
        dt, gen = dtype or "float32", _rng(rng)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dt, rng=gen
        )
        self._common(
            d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
            norm_first, bias, dt, gen,
        )  # fmt: skip

    def forward(
        self,
        src: Tensor,
        src_mask: Mask | None = None,
        src_key_padding_mask: Mask | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        src_mask, src_key_padding_mask = _tensor(src_mask, src), _tensor(src_key_padding_mask, src)

        def sa(x: Tensor) -> Tensor:
            out = self.self_attn(
                x, x, x, src_key_padding_mask, False, src_mask, is_causal=is_causal
            )[0]
            dropped: Tensor = self.dropout1(out)
            return dropped

        x = src
        if self.norm_first:
            x = x + sa(self.norm1(x))
            return x + self._ff(self.norm2(x), self.dropout2)
        x = self.norm1(x + sa(x))
        out: Tensor = self.norm2(x + self._ff(x, self.dropout2))
        return out


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over ``memory``, then feed-forward (PyTorch's).

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> layer = TransformerDecoderLayer(16, 4, dim_feedforward=32, rng=0)
    >>> tgt, memory = g.input("tgt", (5, 2, 16), free=(1,)), g.input("m", (9, 2, 16), free=(1,))
    >>> layer(tgt, memory, tgt_is_causal=True).shape
    (5, 2, 16)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Module = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: object = None,
        dtype: str | None = None,
        *,
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        check_torch_options("TransformerDecoderLayer", device)
        dt, gen = dtype or "float32", _rng(rng)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dt, rng=gen
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dt, rng=gen
        )
        self._common(
            d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
            norm_first, bias, dt, gen,
        )  # fmt: skip
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dt)
        self.dropout3 = Dropout(dropout)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Mask | None = None,
        memory_mask: Mask | None = None,
        tgt_key_padding_mask: Mask | None = None,
        memory_key_padding_mask: Mask | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        tgt_mask, memory_mask = _tensor(tgt_mask, tgt), _tensor(memory_mask, tgt)
        tgt_key_padding_mask = _tensor(tgt_key_padding_mask, tgt)
        memory_key_padding_mask = _tensor(memory_key_padding_mask, tgt)

        def sa(x: Tensor) -> Tensor:
            out = self.self_attn(
                x, x, x, tgt_key_padding_mask, False, tgt_mask, is_causal=tgt_is_causal
            )[0]
            dropped: Tensor = self.dropout1(out)
            return dropped

        def mha(x: Tensor) -> Tensor:
            out = self.multihead_attn(
                x,
                memory,
                memory,
                memory_key_padding_mask,
                False,
                memory_mask,
                is_causal=memory_is_causal,
            )[0]
            dropped: Tensor = self.dropout2(out)
            return dropped

        x = tgt
        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + mha(self.norm2(x))
            return x + self._ff(self.norm3(x), self.dropout3)
        x = self.norm1(x + sa(x))
        x = self.norm2(x + mha(x))
        out: Tensor = self.norm3(x + self._ff(x, self.dropout3))
        return out


def _tensor(mask: Mask | None, like: Tensor) -> Tensor | None:
    return None if mask is None else as_mask(mask, like)


def _clones(layer: Module, n: int) -> ModuleList:
    """``n`` deep copies of ``layer`` (same starting values), each dropout re-seeded."""
    copies = []
    for _ in range(n):
        clone = copy.deepcopy(layer)
        for _, m in clone.named_modules():
            if isinstance(m, Dropout):
                m.seed.value = np.array((next(_SEEDS) * 0x9E3779B1) % (1 << 30), dtype=np.int64)
        copies.append(clone)
    return ModuleList(copies)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer``, then ``norm`` if given (PyTorch's).

    >>> from asgrad.tensor import Graph
    >>> enc = TransformerEncoder(TransformerEncoderLayer(8, 2, 16, rng=0), num_layers=2)
    >>> enc(Graph().input("src", (4, 3, 8), free=(1,)), is_causal=True).shape
    (4, 3, 8)
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Mask | None = None,
        src_key_padding_mask: Mask | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        mask, padding = _tensor(mask, src), _tensor(src_key_padding_mask, src)
        x = src
        for layer in self.layers:
            x = layer(x, mask, padding, bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return x


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer``, then ``norm`` if given (PyTorch's).

    >>> from asgrad.nn import TransformerDecoder, TransformerDecoderLayer
    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> decoder = TransformerDecoder(TransformerDecoderLayer(16, 4, dim_feedforward=32, rng=0), 2)
    >>> tgt, memory = g.input("tgt", (5, 2, 16)), g.input("m", (9, 2, 16))
    >>> decoder(tgt, memory).shape
    (5, 2, 16)
    """

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Mask | None = None,
        memory_mask: Mask | None = None,
        tgt_key_padding_mask: Mask | None = None,
        memory_key_padding_mask: Mask | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                _tensor(tgt_mask, tgt),
                _tensor(memory_mask, tgt),
                _tensor(tgt_key_padding_mask, tgt),
                _tensor(memory_key_padding_mask, tgt),
                bool(tgt_is_causal),
                memory_is_causal,
            )
        if self.norm is not None:
            x = self.norm(x)
        return x


class Transformer(Module):
    """PyTorch's ``nn.Transformer``: an encoder and a decoder stack, each with a final norm.

    Every weight of more than one axis is redrawn Xavier-uniform, as PyTorch's
    ``_reset_parameters`` does.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> model = Transformer(16, 4, 1, 1, 32, rng=0)
    >>> src, tgt = g.input("src", (7, 2, 16), free=(1,)), g.input("tgt", (5, 2, 16), free=(1,))
    >>> model(src, tgt, tgt_mask=Transformer.generate_square_subsequent_mask(5)).shape
    (5, 2, 16)
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Module = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: object = None,
        dtype: str | None = None,
        *,
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        check_torch_options("Transformer", device)
        dt, gen = dtype or "float32", _rng(rng)
        options = (dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, *options, bias, dtype=dt, rng=gen)
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dt)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            dec = TransformerDecoderLayer(d_model, nhead, *options, bias, dtype=dt, rng=gen)
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dt)
            self.decoder = TransformerDecoder(dec, num_decoder_layers, norm)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if len(p.shape) > 1:
                init.xavier_uniform_(p, rng=gen)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Mask | None = None,
        tgt_mask: Mask | None = None,
        memory_mask: Mask | None = None,
        src_key_padding_mask: Mask | None = None,
        tgt_key_padding_mask: Mask | None = None,
        memory_key_padding_mask: Mask | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        out: Tensor = self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )
        return out

    @staticmethod
    def generate_square_subsequent_mask(sz: int, dtype: str = "float32") -> np.ndarray:
        """PyTorch's causal mask: 0 on and below the diagonal, -inf above (an array)."""
        return np.triu(np.full((sz, sz), -np.inf, dtype=dtype), k=1)
