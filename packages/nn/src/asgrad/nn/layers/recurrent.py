"""Recurrent layers: ``RNN``, ``LSTM`` and ``GRU``, each direction of each layer one ``scan``.

The options are PyTorch's (``num_layers``, ``bias``, ``batch_first``, ``dropout``
between layers, ``bidirectional``, initial states), and so are the parameter names
and shapes, so that a PyTorch ``state_dict`` loads unchanged
(``model.load_state_dict({k: v.numpy() for k, v in torch_model.state_dict().items()})``):

================================  ==========================================
name (``k``: layer, from 0)       shape (``G``: 1 RNN, 4 LSTM, 3 GRU)
================================  ==========================================
``weight_ih_l{k}``                ``(G * hidden_size, input_size)`` for k = 0,
                                  ``(G * hidden_size, D * hidden_size)`` after
``weight_hh_l{k}``                ``(G * hidden_size, hidden_size)``
``bias_ih_l{k}``, ``bias_hh_l{k}``  ``(G * hidden_size,)``
``..._l{k}_reverse``              the same, for the backward direction
================================  ==========================================

(``D`` is 2 when bidirectional, else 1; gates in PyTorch's order.) Each layer and
direction projects the whole input sequence with one matrix product outside the loop,
and the loop computes only the recurrent part, so the graph has one ``scan`` node per
layer and direction whatever the sequence length.

Variable lengths: ``mask`` (shaped like the input's first two axes, true or 1 on
the steps that exist) holds the state through the missing steps and zeroes their
outputs, as a packed sequence does in PyTorch when the padding is at the end: the
final state is the one after each sequence's last step, and the backward direction
starts at it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int, probability
from asgrad.nn.layers.recurrent_cells import (
    Weights,
    bind,
    declare,
    gru_step,
    lstm_step,
    rnn_step,
    zeros_like_state,
)
from asgrad.nn.module import Module
from asgrad.tensor import ArgumentError, Tensor, Variable, concat, scan, stack, where
from asgrad.tensor.api.nn_functional import dropout
from asgrad.tensor.errors import ShapeError

__all__ = ["GRU", "LSTM", "RNN"]


class _Recurrent(Module):
    mode = "LSTM"
    _seed: Variable

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size = positive_int(input_size, name, "input_size")
        self.hidden_size = positive_int(hidden_size, name, "hidden_size")
        self.num_layers = positive_int(num_layers, name, "num_layers")
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        self.dropout = probability(dropout, name)
        self.bidirectional = bool(bidirectional)
        self.dtype = dtype
        dirs = 2 if self.bidirectional else 1
        for k in range(self.num_layers):
            size = self.input_size if k == 0 else dirs * self.hidden_size
            for d in range(dirs):
                suffix = f"_l{k}" + ("_reverse" if d else "")
                declare(self, suffix, self.mode, size, self.hidden_size, self.bias, dtype, rng)
        # Dropout between layers draws from a seed kept out of the registered buffers,
        # so that the state_dict holds PyTorch's names only (the seed is not saved).
        start = int(np.random.default_rng(rng if isinstance(rng, int) else None).integers(1 << 30))
        seed = Variable("dropout_seed", np.array(start, dtype=np.int64), trainable=False)
        object.__setattr__(self, "_seed", seed)

    def _dropout(self, x: Tensor) -> Tensor:
        """Dropout between layers, as [`Dropout`][asgrad.nn.Dropout] (mode read at run time)."""
        if not self.training or self.dropout == 0.0:
            return x
        g = x.graph
        seed = g.updates[self._seed] if self._seed in g.updates else g.bind(self._seed)
        out = where(self.mode_flag(g), dropout(x, self.dropout, seed), x)
        if self._seed in g.updates:
            g.updates[self._seed] = seed + 1
        else:
            g.add_update(self._seed, seed + 1)
        return out

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _states(self, hx: Any, count: int) -> list[Tensor | None]:
        """The initial states, one per layer and direction (None: zeros)."""
        if hx is None:
            return [None] * count
        name = type(self).__name__
        want = (self.num_layers * self.directions,)
        if not isinstance(hx, Tensor) or hx.shape[:1] != want or hx.ndim != 3:
            got = hx.node.type if isinstance(hx, Tensor) else type(hx).__name__
            raise ShapeError(
                f"{name}: an initial state must be (num_layers * directions, batch,"
                f" hidden_size) = ({want[0]}, batch, {self.hidden_size}); got {got}"
            )
        return [hx[i] for i in range(count)]

    def _run(
        self, x: Tensor, states: list[list[Tensor | None]], mask: Tensor | None
    ) -> tuple[Tensor, list[list[Tensor]]]:
        """Every layer on the time-major ``x``; returns the last layer's outputs and
        the final states (per state kind, one per layer and direction)."""
        name = type(self).__name__
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            order = "(batch, seq, features)" if self.batch_first else "(seq, batch, features)"
            raise ShapeError(
                f"{name}: input is {x.node.type}; it must be {order} with {self.input_size}"
                " features"
            )
        if self.batch_first:
            x = x.transpose(1, 0, 2)
        m = None
        if mask is not None:
            m = mask.transpose(1, 0) if self.batch_first else mask
            if m.ndim != 2:
                raise ShapeError(
                    f"{name}: mask is {mask.node.type}; it must be the input's first two axes"
                )
            m = m.cast(x.dtype).expand_dims(-1)
        finals: list[list[Tensor]] = [[] for _ in states]
        layer_in = x
        for k in range(self.num_layers):
            outs = []
            for d in range(self.directions):
                w = bind(self, f"_l{k}" + ("_reverse" if d else ""), x.graph)
                i = k * self.directions + d
                init_states: list[Tensor] = []
                for s in states:
                    given = s[i]
                    if given is None:
                        given = zeros_like_state(layer_in[0], self.hidden_size)
                    init_states.append(given)
                ys, last = self._direction(w, layer_in, init_states, m, reverse=d == 1)
                outs.append(ys)
                for kind, value in zip(finals, last, strict=True):
                    kind.append(value)
            layer_in = outs[0] if len(outs) == 1 else concat(outs, axis=-1)
            if k < self.num_layers - 1:
                layer_in = self._dropout(layer_in)
        out = layer_in.transpose(1, 0, 2) if self.batch_first else layer_in
        return out, finals

    def _direction(
        self, w: Weights, x: Tensor, init_states: list[Tensor], m: Tensor | None, *, reverse: bool
    ) -> tuple[Tensor, list[Tensor]]:
        xw = w.project(x)
        mode = self.mode

        def step(carry: list[Tensor], xs_t: list[Tensor]) -> tuple[list[Tensor], Tensor]:
            xw_t = xs_t[0]
            if mode == "LSTM":
                new = list(lstm_step(xw_t, carry[0], carry[1], w))
            elif mode == "GRU":
                new = [gru_step(xw_t, carry[0], w)]
            else:
                new = [rnn_step(mode, xw_t, carry[0], w)]
            if m is None:
                return new, new[0]
            m_t = xs_t[1]
            kept = [old + m_t * (n - old) for n, old in zip(new, carry, strict=True)]
            return kept, new[0] * m_t

        xs = [xw] if m is None else [xw, m]
        last, ys = scan(step, list(init_states), xs, reverse=reverse)
        return ys, list(last)

    def extra_repr(self) -> str:
        parts = [f"{self.input_size}, {self.hidden_size}"]
        if self.num_layers != 1:
            parts.append(f"num_layers={self.num_layers}")
        for flag in ("batch_first", "bidirectional"):
            if getattr(self, flag):
                parts.append(f"{flag}=True")
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        return ", ".join(parts)


class RNN(_Recurrent):
    """An Elman RNN, as ``torch.nn.RNN``: ``output, h_n = rnn(x, h_0=None, mask=None)``.

    ``nonlinearity`` is ``"tanh"`` or ``"relu"``. See the module docstring for the
    options, the parameter names and the mask.

    >>> from asgrad.tensor import Graph
    >>> out, h = RNN(4, 3, num_layers=2, rng=0)(Graph().input("x", (5, 2, 4)))
    >>> (out.shape, h.shape)
    ((5, 2, 3), (2, 2, 3))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *args: Any,
        nonlinearity: str = "tanh",
        **kwargs: Any,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        object.__setattr__(self, "mode", f"RNN_{nonlinearity.upper()}")
        super().__init__(input_size, hidden_size, *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(
        self, x: Tensor, hx: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        count = self.num_layers * self.directions
        out, (h,) = self._run(x, [self._states(hx, count)], mask)
        return out, stack(h, axis=0)


class LSTM(_Recurrent):
    """A long short-term memory network, as ``torch.nn.LSTM``:
    ``output, (h_n, c_n) = lstm(x, (h_0, c_0)=None, mask=None)``.

    >>> from asgrad.tensor import Graph
    >>> out, (h, c) = LSTM(4, 3, bidirectional=True, batch_first=True, rng=0)(
    ...     Graph().input("x", (2, 5, 4)))
    >>> (out.shape, h.shape, c.shape)
    ((2, 5, 6), (2, 2, 3), (2, 2, 3))
    """

    mode = "LSTM"

    def forward(
        self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        count = self.num_layers * self.directions
        h0, c0 = hx if hx is not None else (None, None)
        out, (h, c) = self._run(x, [self._states(h0, count), self._states(c0, count)], mask)
        return out, (stack(h, axis=0), stack(c, axis=0))


class GRU(_Recurrent):
    """A gated recurrent unit network, as ``torch.nn.GRU``: ``output, h_n = gru(x, h_0=None,
    mask=None)``.

    >>> from asgrad.tensor import Graph
    >>> out, h = GRU(4, 3, rng=0)(Graph().input("x", (5, 2, 4)))
    >>> (out.shape, h.shape)
    ((5, 2, 3), (1, 2, 3))
    """

    mode = "GRU"

    def forward(
        self, x: Tensor, hx: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        count = self.num_layers * self.directions
        out, (h,) = self._run(x, [self._states(hx, count)], mask)
        return out, stack(h, axis=0)
