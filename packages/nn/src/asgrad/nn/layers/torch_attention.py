"""``MultiheadAttention`` with PyTorch's signature, parameter names and defaults.

asgrad's own [`SelfAttention`][asgrad.nn.SelfAttention] is batch-first with keyword
masks (``causal``, ``attn_bias``, RoPE, ALiBi). This one is PyTorch's
``nn.MultiheadAttention`` for code and checkpoints that come from PyTorch:
sequence-first ``(L, N, E)`` unless ``batch_first=True``; ``in_proj_weight`` in
PyTorch's ``(3E, E)`` layout and ``in_proj_bias``; ``out_proj`` a ``Linear``;
``forward`` returns ``(output, weights)``.
"""

from __future__ import annotations

import math

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.layers.attention import MASKED
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.linear import Linear
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor, where
from asgrad.tensor.errors import ArgumentError, DTypeError, ShapeError

Mask = Tensor | np.ndarray


def check_torch_options(name: str, device: object, **unsupported: tuple[object, object]) -> None:
    """Refuse PyTorch options asgrad does not implement (given a non-default value)."""
    if device not in (None, "cpu"):
        raise ArgumentError(
            f"{name}: device={device!r}; asgrad places programs on a device when compiling"
            " (optimizer.compile(loss, backend='gpu')), so leave device out"
        )
    for option, (value, default) in unsupported.items():
        if value != default:
            raise ArgumentError(f"{name}: {option}={value!r} is not supported by asgrad")


def as_mask(mask: Mask, like: Tensor) -> Tensor:
    """A mask given as a Tensor or an array (a constant of ``like``'s graph)."""
    if isinstance(mask, Tensor):
        return mask
    array = np.asarray(mask)
    # A float mask keeps full precision: in the scores' dtype (constants default to float32).
    return like.graph.constant(array, like.dtype if array.dtype.kind == "f" else None)


def apply_mask(scores: Tensor, mask: Tensor, what: str) -> Tensor:
    """Bool: True is masked out (PyTorch's convention); float: added to the scores."""
    if mask.dtype == "bool":
        return where(mask, MASKED, scores)
    if mask.dtype not in ("float32", "float64", "float16"):
        raise DTypeError(f"{what} must be bool (True = masked) or float (added), got {mask.dtype}")
    return scores + mask.cast(scores.dtype)


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: same arguments, names, layouts and defaults.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(attn_output, attn_weights)``; inputs are ``(L, N, E)`` (sequence first)
    unless ``batch_first``. ``attn_mask`` is ``(L, S)`` or ``(N * num_heads, L, S)``,
    ``key_padding_mask`` ``(N, S)``; a bool mask is True where attention is not
    allowed, a float one is added to the scores (a Tensor or a numpy array). With
    ``is_causal=True`` and no ``attn_mask``, a causal mask is applied (PyTorch
    requires the mask too). Masked scores are -1e9, not -inf, so a fully masked row
    gives uniform weights rather than NaN. ``add_bias_kv``, ``add_zero_attn`` and
    ``kdim``/``vdim`` other than ``embed_dim`` are not supported.

    >>> from asgrad.tensor import Graph
    >>> mha = MultiheadAttention(16, 4, rng=0)
    >>> x = Graph().input("x", (7, 3, 16), free=(1,))
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((7, 3, 16), (3, 7, 7))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: object = None,
        dtype: str | None = None,
        *,
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        name = "MultiheadAttention"
        embed_dim = positive_int(embed_dim, name, "embed_dim")
        num_heads = positive_int(num_heads, name, "num_heads")
        check_torch_options(
            name,
            device,
            add_bias_kv=(add_bias_kv, False),
            add_zero_attn=(add_zero_attn, False),
            kdim=(kdim, kdim if kdim is None else embed_dim),
            vdim=(vdim, vdim if vdim is None else embed_dim),
        )
        if embed_dim % num_heads:
            raise ShapeError(
                f"{name}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}"
            )
        dt = dtype or "float32"
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.dropout = float(dropout)
        # PyTorch's initialisation: Xavier-uniform in_proj_weight, zero biases.
        self.in_proj_weight = Parameter(
            (3 * embed_dim, embed_dim), init.xavier_uniform, dtype=dt, rng=rng
        )
        self.in_proj_bias: Parameter | None = None
        self.out_proj = Linear(embed_dim, embed_dim, bias, bias_init=init.zeros, dtype=dt, rng=rng)
        if bias:
            self.in_proj_bias = Parameter((3 * embed_dim,), init.zeros, dtype=dt)
        self.attn_dropout = Dropout(dropout)

    def _project(self, x: Tensor, part: slice) -> Tensor:
        g = x.graph
        y = x @ g.bind(self.in_proj_weight)[part].T
        if self.in_proj_bias is not None:
            y = y + g.bind(self.in_proj_bias)[part]
        return y

    def _heads(self, x: Tensor) -> Tensor:
        """``(N, T, E)`` -> ``(N, H, T, D)``, the batch size left free."""
        return x.reshape(-1, x.shape[1], self.num_heads, self.head_dim).transpose(0, 2, 1, 3)

    def _batch_first(self, x: Tensor, what: str) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            layout = "(batch, seq, E)" if self.batch_first else "(seq, batch, E)"
            raise ShapeError(
                f"MultiheadAttention({self.embed_dim}, {self.num_heads}): {what} must be"
                f" {layout} with E = {self.embed_dim}, got shape {list(x.shape)}"
            )
        return x if self.batch_first else x.swapaxes(0, 1)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Mask | None = None,
        need_weights: bool = True,
        attn_mask: Mask | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        same = query.node is key.node and key.node is value.node
        q_in = self._batch_first(query, "query")
        e = self.embed_dim
        if same:
            q, k, v = (self._project(q_in, slice(i * e, (i + 1) * e)) for i in range(3))
        else:
            k_in, v_in = self._batch_first(key, "key"), self._batch_first(value, "value")
            if k_in.shape[1] != v_in.shape[1]:
                raise ShapeError(
                    f"MultiheadAttention: key {list(key.shape)} and value"
                    f" {list(value.shape)} differ in length"
                )
            q = self._project(q_in, slice(0, e))
            k, v = self._project(k_in, slice(e, 2 * e)), self._project(v_in, slice(2 * e, 3 * e))
        tq, tk = q.shape[1], k.shape[1]
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        scores = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if attn_mask is not None:
            mask = as_mask(attn_mask, scores)
            if mask.ndim == 3:
                mask = mask.reshape(-1, self.num_heads, tq, tk)
            elif mask.ndim != 2:
                raise ShapeError(
                    f"attn_mask must be (L, S) or (N * num_heads, L, S), got {list(mask.shape)}"
                )
            scores = apply_mask(scores, mask, "attn_mask")
        elif is_causal:
            allowed = np.tril(np.ones((tq, tk), dtype=bool), k=tk - tq)
            scores = where(scores.graph.constant(allowed), scores, MASKED)
        if key_padding_mask is not None:
            mask = as_mask(key_padding_mask, scores)
            if mask.ndim != 2 or mask.shape[1] != tk:
                raise ShapeError(f"key_padding_mask must be (batch, {tk}), got {list(mask.shape)}")
            scores = apply_mask(scores, mask.reshape(-1, 1, 1, tk), "key_padding_mask")
        weights = self.attn_dropout(scores.softmax(axis=-1))
        out = (weights @ v).transpose(0, 2, 1, 3).reshape(-1, tq, e)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.swapaxes(0, 1)
        if not need_weights:
            return out, None
        return out, weights.mean(axis=1) if average_attn_weights else weights

    def extra_repr(self) -> str:
        return (
            f"{self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout},"
            f" batch_first={self.batch_first}"
        )
