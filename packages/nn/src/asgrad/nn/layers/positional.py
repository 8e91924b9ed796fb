"""Positional encodings: sinusoidal, learned, rotary (RoPE) and ALiBi.

Sequences are laid out ``(..., T, D)``: positions run along the second-to-last
axis. ``offset`` (an int, or an integer scalar Tensor fed at run time) is the
position of the first element, for decoding with a cache of earlier positions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Graph, Tensor, concat
from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import is_int

Offset = int | Tensor


def _rows(
    table: np.ndarray | Tensor, length: int, offset: Offset, like: Tensor, what: str
) -> Tensor:
    """Rows ``offset .. offset + length`` of ``table`` (a constant array or a tensor)."""
    g = like.graph
    max_len = table.shape[0]
    if isinstance(offset, Tensor):
        if not is_int(offset.dtype) or offset.ndim != 0:
            raise DTypeError(
                f"{what}: offset must be an int or an integer scalar Tensor, got {offset}"
            )
        positions = g.constant(np.arange(length, dtype=np.int64)) + offset.cast("int64")
        source = table if isinstance(table, Tensor) else g.constant(table, like.dtype)
        if length > max_len:
            raise ShapeError(f"{what}: sequence length {length} exceeds max_len {max_len}")
        return source.gather(positions, axis=0)
    if offset < 0 or offset + length > max_len:
        raise ShapeError(
            f"{what}: positions {offset}..{offset + length - 1} exceed max_len {max_len};"
            f" build the layer with a larger max_len"
        )
    if isinstance(table, Tensor):
        return table[offset : offset + length]
    return g.constant(table[offset : offset + length], like.dtype)


def _sequence_length(x: Tensor, what: str) -> int:
    if x.ndim < 2:
        raise ShapeError(f"{what} expects (..., T, D) inputs, got shape {list(x.shape)}")
    return x.shape[-2]


def sinusoidal_table(max_len: int, dim: int, base: float = 10000.0) -> np.ndarray:
    """``pe[pos, 2i] = sin(pos / base**(2i/dim))``, ``pe[pos, 2i+1] = cos(...)``."""
    position = np.arange(max_len, dtype=np.float64)[:, None]
    freq = np.exp(np.arange(0, dim, 2, dtype=np.float64) * (-math.log(base) / dim))
    table = np.zeros((max_len, dim))
    table[:, 0::2] = np.sin(position * freq)
    table[:, 1::2] = np.cos(position * freq)[:, : dim // 2]
    return table


class SinusoidalPositionalEncoding(Module):
    """Adds the fixed sine/cosine encoding of Vaswani et al. (2017) to ``(..., T, dim)``.

    No parameters. ``forward(x, offset=0)`` adds the rows of positions
    ``offset .. offset + T - 1``.

    >>> from asgrad.tensor import Graph
    >>> pe = SinusoidalPositionalEncoding(8, max_len=64)
    >>> pe(Graph().input("x", (2, 10, 8))).shape
    (2, 10, 8)
    """

    def __init__(self, dim: int, max_len: int = 5000, base: float = 10000.0) -> None:
        super().__init__()
        dim = positive_int(dim, "SinusoidalPositionalEncoding", "dim")
        max_len = positive_int(max_len, "SinusoidalPositionalEncoding", "max_len")
        self.dim, self.max_len, self.base = dim, max_len, base
        self.table = sinusoidal_table(max_len, dim, base)

    def forward(self, x: Tensor, offset: Offset = 0) -> Tensor:
        if not x.ndim or x.shape[-1] != self.dim:
            raise ShapeError(
                f"SinusoidalPositionalEncoding({self.dim}) got input of shape {list(x.shape)};"
                f" its last axis must be {self.dim}"
            )
        length = _sequence_length(x, "SinusoidalPositionalEncoding")
        return x + _rows(self.table, length, offset, x, "SinusoidalPositionalEncoding")

    def extra_repr(self) -> str:
        return f"{self.dim}, max_len={self.max_len}"


class LearnedPositionalEncoding(Module):
    """Adds a learned vector per position, ``weight`` of shape ``(max_len, dim)``.

    ``weight`` is drawn from N(0, 1) as PyTorch's ``nn.Embedding`` (the usual way
    to write this layer there), or N(0, ``std``**2) when ``std`` is given.

    >>> from asgrad.tensor import Graph
    >>> pe = LearnedPositionalEncoding(64, 8, std=0.02, rng=0)
    >>> pe(Graph().input("x", (2, 10, 8))).shape
    (2, 10, 8)
    """

    def __init__(
        self,
        max_len: int,
        dim: int,
        *,
        std: float | None = None,
        weight_init: Callable[..., np.ndarray] | None = None,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        max_len = positive_int(max_len, "LearnedPositionalEncoding", "max_len")
        dim = positive_int(dim, "LearnedPositionalEncoding", "dim")
        self.max_len, self.dim, self.std = max_len, dim, std
        w_init = weight_init or functools.partial(init.normal, std=1.0 if std is None else std)
        self.weight = Parameter((max_len, dim), w_init, dtype=dtype, rng=rng)

    def forward(self, x: Tensor, offset: Offset = 0) -> Tensor:
        if not x.ndim or x.shape[-1] != self.dim:
            raise ShapeError(
                f"LearnedPositionalEncoding({self.max_len}, {self.dim}) got input of shape"
                f" {list(x.shape)}; its last axis must be {self.dim}"
            )
        length = _sequence_length(x, "LearnedPositionalEncoding")
        weight = x.graph.bind(self.weight)
        return x + _rows(weight, length, offset, x, "LearnedPositionalEncoding")

    def extra_repr(self) -> str:
        std = "" if self.std is None else f", std={self.std}"
        return f"{self.max_len}, {self.dim}{std}"


class RoPE(Module):
    """Rotary position embedding (Su et al., 2021), split-half (GPT-NeoX) layout.

    For ``x`` of shape ``(..., T, dim)`` with halves ``x1 = x[..., :dim/2]`` and
    ``x2 = x[..., dim/2:]``, and angles ``(offset + t) * base**(-2i/dim)``:
    ``out = concat(x1 cos - x2 sin, x2 cos + x1 sin)``. Applied to queries and keys
    (per head) so that their dot product depends on the relative position only.
    No parameters; any ``T`` with ``offset + T <= max_len``.

    >>> from asgrad.tensor import Graph
    >>> rope = RoPE(16, max_len=128)
    >>> rope(Graph().input("q", (2, 4, 10, 16)), offset=3).shape
    (2, 4, 10, 16)
    """

    def __init__(self, dim: int, max_len: int = 2048, base: float = 10000.0) -> None:
        super().__init__()
        dim, max_len = positive_int(dim, "RoPE", "dim"), positive_int(max_len, "RoPE", "max_len")
        if dim % 2:
            raise ShapeError(f"RoPE needs an even head dimension, got {dim}")
        self.dim, self.max_len, self.base = dim, max_len, base
        inv_freq = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
        angles = np.arange(max_len, dtype=np.float64)[:, None] * inv_freq[None, :]
        self.cos, self.sin = np.cos(angles), np.sin(angles)

    def forward(self, x: Tensor, offset: Offset = 0) -> Tensor:
        if not x.ndim or x.shape[-1] != self.dim:
            raise ShapeError(
                f"RoPE({self.dim}) got input of shape {list(x.shape)}; its last axis (the"
                f" head dimension) must be {self.dim}"
            )
        length = _sequence_length(x, "RoPE")
        cos = _rows(self.cos, length, offset, x, "RoPE")
        sin = _rows(self.sin, length, offset, x, "RoPE")
        half = self.dim // 2
        x1, x2 = x[..., :half], x[..., half:]
        return concat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def extra_repr(self) -> str:
        return f"{self.dim}, max_len={self.max_len}, base={self.base}"


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Head ``i`` (1-based) gets ``2**(-8 i / n)``; for ``n`` not a power of two, the
    paper's rule: the slopes of the closest lower power of two, then every other slope
    of twice that many heads."""

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    if num_heads & (num_heads - 1) == 0:
        return np.array(power_of_two(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two(2 * closest)[0::2][: num_heads - closest]
    return np.array(power_of_two(closest) + extra)


class ALiBi(Module):
    """Attention with linear biases (Press et al., 2022): ``scores - slope_h * distance``.

    ``forward(scores)`` adds the bias to attention scores ``(..., H, Tq, Tk)``;
    ``bias(q_len, k_len, like)`` returns it as a constant ``(H, Tq, Tk)`` tensor.
    Query ``i`` sits at key position ``i + k_len - q_len`` (the last queries of the
    keys' sequence); the distance is ``|query position - key position|``, which in
    a causal model is the paper's ``i - j``. No parameters.

    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = positive_int(num_heads, "ALiBi", "num_heads")
        self.slopes = alibi_slopes(self.num_heads)

    def bias_array(self, q_len: int, k_len: int) -> np.ndarray:
        """The bias ``(H, q_len, k_len)`` as a float64 numpy array."""
        q_pos = np.arange(q_len)[:, None] + (k_len - q_len)
        k_pos = np.arange(k_len)[None, :]
        distance = np.abs(q_pos - k_pos).astype(np.float64)
        bias: np.ndarray = -self.slopes[:, None, None] * distance[None]
        return bias

    def bias(self, q_len: int, k_len: int, like: Tensor | Graph, dtype: str = "float32") -> Tensor:
        """The (heads, q_len, k_len) bias as a constant in ``like``'s graph."""
        g = like.graph if isinstance(like, Tensor) else like
        dt = like.dtype if isinstance(like, Tensor) else dtype
        return g.constant(self.bias_array(q_len, k_len), dt)

    def forward(self, scores: Tensor) -> Tensor:
        if scores.ndim < 3 or scores.shape[-3] != self.num_heads:
            raise ShapeError(
                f"ALiBi({self.num_heads}) expects scores (..., {self.num_heads}, Tq, Tk),"
                f" got shape {list(scores.shape)}"
            )
        return scores + self.bias(scores.shape[-2], scores.shape[-1], scores)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"
