"""Recurrent cells (``RNNCell``, ``LSTMCell``, ``GRUCell``) and the step functions that
the sequence layers of `asgrad.nn.layers.recurrent` run inside a ``scan``.

Parameters are stored in PyTorch's layout and under PyTorch's names, so a PyTorch
``state_dict`` loads as it is: ``weight_ih`` is ``(gates * hidden_size, input_size)``,
``weight_hh`` is ``(gates * hidden_size, hidden_size)``, ``bias_ih`` and ``bias_hh``
are ``(gates * hidden_size,)``; the gates are stacked in PyTorch's order (LSTM:
input, forget, cell, output; GRU: reset, update, new). Every value is drawn from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch draws them.
"""

from __future__ import annotations

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import ArgumentError, Graph, Tensor, zeros_like
from asgrad.tensor.errors import ShapeError

__all__ = [
    "GATES",
    "GRUCell",
    "LSTMCell",
    "RNNCell",
    "Weights",
    "gru_step",
    "lstm_step",
    "rnn_step",
]

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class Weights:
    """One layer and direction's parameters, bound in a graph: the input projection
    ``x @ w_ih.T + b_ih`` (computed for every step at once, outside the loop), and the
    transposed recurrent weight and bias that each step reads."""

    def __init__(
        self,
        g: Graph,
        w_ih: Parameter,
        w_hh: Parameter,
        b_ih: Parameter | None,
        b_hh: Parameter | None,
    ) -> None:
        self.w_ih_t = g.bind(w_ih).T
        self.w_hh_t = g.bind(w_hh).T
        self.b_ih = g.bind(b_ih) if b_ih is not None else None
        self.b_hh = g.bind(b_hh) if b_hh is not None else None

    def project(self, x: Tensor) -> Tensor:
        """The input's share of every gate: ``x @ w_ih.T (+ b_ih)``."""
        y = x @ self.w_ih_t
        return y + self.b_ih if self.b_ih is not None else y

    def recur(self, h: Tensor) -> Tensor:
        """The hidden state's share: ``h @ w_hh.T (+ b_hh)``."""
        y = h @ self.w_hh_t
        return y + self.b_hh if self.b_hh is not None else y


def _gate(x: Tensor, k: int, size: int) -> Tensor:
    return x[..., k * size : (k + 1) * size]


def rnn_step(mode: str, xw: Tensor, h: Tensor, w: Weights) -> Tensor:
    """``act(xw + h @ w_hh.T + b_hh)``, ``act`` tanh (``RNN_TANH``) or relu."""
    pre = xw + w.recur(h)
    return pre.tanh() if mode == "RNN_TANH" else pre.relu()


def lstm_step(xw: Tensor, h: Tensor, c: Tensor, w: Weights) -> tuple[Tensor, Tensor]:
    """PyTorch's LSTM step: gates i, f, g, o; ``c' = f c + i g``, ``h' = o tanh(c')``."""
    size = h.shape[-1]
    gates = xw + w.recur(h)
    i, f = _gate(gates, 0, size).sigmoid(), _gate(gates, 1, size).sigmoid()
    g, o = _gate(gates, 2, size).tanh(), _gate(gates, 3, size).sigmoid()
    c_new = f * c + i * g
    return o * c_new.tanh(), c_new


def gru_step(xw: Tensor, h: Tensor, w: Weights) -> Tensor:
    """PyTorch's GRU step: ``n = tanh(x_n + r (h_n))``, ``h' = (1 - z) n + z h``."""
    size = h.shape[-1]
    hw = w.recur(h)
    r = (_gate(xw, 0, size) + _gate(hw, 0, size)).sigmoid()
    z = (_gate(xw, 1, size) + _gate(hw, 1, size)).sigmoid()
    n = (_gate(xw, 2, size) + r * _gate(hw, 2, size)).tanh()
    return (1.0 - z) * n + z * h


def declare(
    module: Module,
    suffix: str,
    mode: str,
    input_size: int,
    hidden_size: int,
    bias: bool,
    dtype: str,
    rng: init.RNG,
) -> None:
    """Add ``weight_ih<suffix>`` ... ``bias_hh<suffix>`` to ``module`` (PyTorch's names)."""
    rows = GATES[mode] * hidden_size
    draw = init.fan_in_uniform(hidden_size)
    setattr(module, f"weight_ih{suffix}", Parameter((rows, input_size), draw, dtype=dtype, rng=rng))
    setattr(
        module, f"weight_hh{suffix}", Parameter((rows, hidden_size), draw, dtype=dtype, rng=rng)
    )
    if bias:
        setattr(module, f"bias_ih{suffix}", Parameter((rows,), draw, dtype=dtype, rng=rng))
        setattr(module, f"bias_hh{suffix}", Parameter((rows,), draw, dtype=dtype, rng=rng))


def bind(module: Module, suffix: str, g: Graph) -> Weights:
    """The parameters of ``module`` named with ``suffix``, bound in ``g``."""
    return Weights(
        g,
        getattr(module, f"weight_ih{suffix}"),
        getattr(module, f"weight_hh{suffix}"),
        getattr(module, f"bias_ih{suffix}", None),
        getattr(module, f"bias_hh{suffix}", None),
    )


def zeros_like_state(x: Tensor, hidden_size: int) -> Tensor:
    """Zeros of ``(batch..., hidden_size)`` for an input ``(batch..., features)`` (at
    any fed batch size; ``x`` is read for its shape only)."""
    return zeros_like(x[..., :1]) + x.graph.constant(np.zeros(hidden_size), x.dtype)


class _Cell(Module):
    mode = "LSTM"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size = positive_int(input_size, name, "input_size")
        self.hidden_size = positive_int(hidden_size, name, "hidden_size")
        self.bias = bool(bias)
        declare(self, "", self.mode, self.input_size, self.hidden_size, self.bias, dtype, rng)

    def _check(self, x: Tensor, h: Tensor | None) -> None:
        name = type(self).__name__
        if not x.shape or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input is {x.node.type}; its last axis must be {self.input_size}"
            )
        if h is not None and h.shape != (*x.shape[:-1], self.hidden_size):
            raise ShapeError(
                f"{name}: the state is {h.node.type}; it must be"
                f" {[*x.shape[:-1], self.hidden_size]} (the input's batch, hidden_size)"
            )

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias}"


class RNNCell(_Cell):
    """One Elman RNN step, as ``torch.nn.RNNCell``: ``h' = act(x W_ih^T + b_ih + h
    W_hh^T + b_hh)`` with ``nonlinearity`` ``"tanh"`` or ``"relu"``.

    >>> from asgrad.tensor import Graph
    >>> RNNCell(4, 3, rng=0)(Graph().input("x", (2, 4))).shape
    (2, 3)
    """

    mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        object.__setattr__(self, "mode", f"RNN_{nonlinearity.upper()}")
        super().__init__(input_size, hidden_size, bias, dtype=dtype, rng=rng)
        self.nonlinearity = nonlinearity

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        self._check(x, h)
        w = bind(self, "", x.graph)
        h = zeros_like_state(x, self.hidden_size) if h is None else h
        return rnn_step(self.mode, w.project(x), h, w)


class LSTMCell(_Cell):
    """One LSTM step, as ``torch.nn.LSTMCell``: ``(h', c') = cell(x, (h, c))``.

    >>> from asgrad.tensor import Graph
    >>> h, c = LSTMCell(4, 3, rng=0)(Graph().input("x", (2, 4)))
    >>> (h.shape, c.shape)
    ((2, 3), (2, 3))
    """

    mode = "LSTM"

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        h, c = state if state is not None else (None, None)
        self._check(x, h)
        self._check(x, c)
        w = bind(self, "", x.graph)
        h = zeros_like_state(x, self.hidden_size) if h is None else h
        c = zeros_like_state(x, self.hidden_size) if c is None else c
        return lstm_step(w.project(x), h, c, w)


class GRUCell(_Cell):
    """One GRU step, as ``torch.nn.GRUCell``: ``h' = cell(x, h)``.

    >>> from asgrad.tensor import Graph
    >>> GRUCell(4, 3, rng=0)(Graph().input("x", (2, 4))).shape
    (2, 3)
    """

    mode = "GRU"

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        self._check(x, h)
        w = bind(self, "", x.graph)
        h = zeros_like_state(x, self.hidden_size) if h is None else h
        return gru_step(w.project(x), h, w)
