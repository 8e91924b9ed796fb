"""``Linear``: an affine map that declares its own parameter shapes and initializers."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ShapeError


class Linear(Module):
    """``y = x @ weight + bias`` over the last axis of ``x``.

    ``weight`` is ``(in_features, out_features)``, the transpose of PyTorch's: PyTorch's
    ``x @ self.weight.T`` is ``x @ self.weight`` here, or ``x @ self.weight_torch(x).T``
    ([`weight_torch`][asgrad.nn.Linear.weight_torch]). By default it is drawn as
    PyTorch's ``nn.Linear`` draws it (Kaiming-uniform with ``a = sqrt(5)``, i.e.
    U(-1/sqrt(in), 1/sqrt(in))) and so is ``bias``.

    Weight tying as in PyTorch: assigning another module's parameter of PyTorch's
    layout ``(out_features, in_features)`` (an ``Embedding(n, d)``'s weight to a
    ``Linear(d, n)``) makes this layer multiply by its transpose
    (``weight_transposed``); both modules then share one [`Parameter`][asgrad.nn.Parameter], which
    ``parameters()`` and optimizers hold once. When ``in_features ==
    out_features`` the layout cannot be told from the shape: use
    [`tie_weight`][asgrad.nn.Linear.tie_weight].

    >>> from asgrad.nn import Embedding
    >>> encoder, decoder = Embedding(10, 4), Linear(4, 10)
    >>> decoder.weight = encoder.weight
    >>> decoder.weight_transposed, decoder.weight is encoder.weight
    (True, True)

    >>> from asgrad.tensor import Graph
    >>> layer = Linear(4, 2, rng=0)
    >>> layer(Graph().input("x", (3, 4))).shape
    (3, 2)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        weight_init: Callable[..., np.ndarray] | None = None,
        bias_init: Callable[..., np.ndarray] | None = None,
        dtype: str = "float32",
        rng: init.RNG = None,
    ) -> None:
        super().__init__()
        in_features = positive_int(in_features, "Linear", "in_features")
        out_features = positive_int(out_features, "Linear", "out_features")
        self.in_features, self.out_features = in_features, out_features
        self.weight_transposed = False
        rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
        w_init = weight_init or _torch_linear_weight
        self.weight = Parameter((in_features, out_features), w_init, dtype=dtype, rng=rng)
        self.bias: Parameter | None = None
        if bias:
            b_init = bias_init or init.fan_in_uniform(in_features)
            self.bias = Parameter((out_features,), b_init, dtype=dtype, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        if not x.shape or x.shape[-1] != self.in_features:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}) got input of shape"
                f" {list(x.shape)}; its last axis must be {self.in_features}"
            )
        w = x.graph.bind(self.weight)
        y = x @ (w.T if self.weight_transposed else w)
        return y + self.bias if self.bias is not None else y

    def weight_torch(self, x: Tensor) -> Tensor:
        """The weight in PyTorch's layout ``(out_features, in_features)``, as a Tensor of
        ``x``'s graph: a port of PyTorch code that writes ``x @ self.weight.T`` writes
        ``x @ self.weight_torch(x).T`` (``self.weight`` here is ``(in, out)``, and
        ``x @ weight`` is this layer's product).

        >>> import numpy as np
        >>> from asgrad.tensor import Graph
        >>> layer = Linear(3, 2)
        >>> layer.weight_torch(Graph().input("x", (1, 3))).shape
        (2, 3)
        """
        w = x.graph.bind(self.weight)
        return w if self.weight_transposed else w.T

    def __setattr__(self, name: str, value: object) -> None:
        if name == "weight" and isinstance(value, Parameter) and "weight" in self._parameters:
            self.tie_weight(value, _layout(self, value))
        else:
            super().__setattr__(name, value)

    def tie_weight(self, param: Parameter, transposed: bool) -> None:
        """Use ``param`` as this layer's weight: ``(out, in)`` if ``transposed`` (PyTorch's
        layout, an ``Embedding``'s weight), else ``(in, out)``."""
        expected = (self.out_features, self.in_features)
        if not transposed:
            expected = expected[::-1]
        if param.shape != expected:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}).tie_weight: a weight with"
                f" transposed={transposed} must be {list(expected)}, got {list(param.shape)}"
            )
        Module.__setattr__(self, "weight", param)
        object.__setattr__(self, "weight_transposed", bool(transposed))

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


def _layout(layer: Linear, param: Parameter) -> bool:
    """Whether ``param`` assigned as ``layer.weight`` is in PyTorch's (out, in) layout."""
    n_in, n_out = layer.in_features, layer.out_features
    if n_in == n_out and param.owned and param.shape == (n_in, n_in):
        raise ArgumentError(
            f"Linear({n_in}, {n_out}): a square weight shared with another module may be in"
            " asgrad's (in, out) layout or PyTorch's (out, in) one; say which with"
            " layer.tie_weight(param, transposed=True) for an Embedding's or a PyTorch-"
            "layout weight, transposed=False for another asgrad Linear's"
        )
    return param.shape == (n_out, n_in) and n_in != n_out


def _torch_linear_weight(
    shape: tuple[int, ...], dtype: str = "float32", rng: init.RNG = None
) -> np.ndarray:
    return init.kaiming_uniform(shape, dtype, rng, a=math.sqrt(5.0))
