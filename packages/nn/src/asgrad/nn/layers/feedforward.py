"""``FeedForward``: the position-wise MLP of a transformer block (Linear, act, Linear)."""

from __future__ import annotations

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.layers.activation import ELU, GELU, Identity, LeakyReLU, ReLU, Sigmoid, SiLU, Tanh
from asgrad.nn.layers.linear import Linear
from asgrad.nn.module import Module
from asgrad.tensor import Tensor
from asgrad.tensor.errors import ArgumentError

_ACTIVATIONS: dict[str, type[Module]] = {
    "gelu": GELU,
    "relu": ReLU,
    "silu": SiLU,
    "tanh": Tanh,
    "sigmoid": Sigmoid,
    "elu": ELU,
    "leaky_relu": LeakyReLU,
    "identity": Identity,
}


def make_activation(activation: str | Module) -> Module:
    """An activation module from its name (``"gelu"``, ``"relu"``...) or as given."""
    if isinstance(activation, Module):
        return activation
    if activation == "gelu_tanh":
        return GELU("tanh")
    try:
        return _ACTIVATIONS[activation]()
    except KeyError:
        known = ", ".join([*sorted(_ACTIVATIONS), "gelu_tanh"])
        raise ArgumentError(f"unknown activation {activation!r}; choose one of {known}") from None


class FeedForward(Module):
    """``fc2(dropout(act(fc1(x))))``: ``dim -> hidden_dim -> dim`` over the last axis.

    ``hidden_dim`` defaults to ``4 * dim``; ``activation`` is a name (``"gelu"``,
    ``"relu"``, ``"silu"``, ``"tanh"``, ``"gelu_tanh"``...) or a module. Both linear
    layers use PyTorch's ``nn.Linear`` initialisation.

    >>> from asgrad.tensor import Graph
    >>> ff = FeedForward(8, 32, rng=0)
    >>> ff(Graph().input("x", (2, 5, 8))).shape
    (2, 5, 8)
    """

    def __init__(
        self,
        dim: int,
        hidden_dim: int | None = None,
        *,
        activation: str | Module = "gelu",
        dropout: float = 0.0,
        bias: bool = True,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        from asgrad.nn.layers.dropout import Dropout

        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.dim = positive_int(dim, "FeedForward", "dim")
        hidden = 4 * self.dim if hidden_dim is None else hidden_dim
        self.hidden_dim = positive_int(hidden, "FeedForward", "hidden_dim")
        self.fc1 = Linear(self.dim, self.hidden_dim, bias, dtype=dtype, rng=rng)
        self.act = make_activation(activation)
        self.dropout = Dropout(dropout)
        self.fc2 = Linear(self.hidden_dim, self.dim, bias, dtype=dtype, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.fc2(self.dropout(self.act(self.fc1(x))))
        return out

    def extra_repr(self) -> str:
        return f"{self.dim}, {self.hidden_dim}"
