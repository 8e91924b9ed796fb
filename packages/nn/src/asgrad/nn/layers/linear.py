"""``Linear``: an affine map that declares its own parameter shapes and initializers."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from asgrad.nn import init
from asgrad.nn.layers._checks import positive_int
from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.errors import ShapeError


class Linear(Module):
    """``y = x @ weight + bias`` over the last axis of ``x``.

    ``weight`` is ``(in_features, out_features)``; by default it is drawn as
    PyTorch's ``nn.Linear`` draws it (Kaiming-uniform with ``a = sqrt(5)``, i.e.
    U(-1/sqrt(in), 1/sqrt(in))) and so is ``bias``.

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
        y = x @ x.graph.bind(self.weight)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


def _torch_linear_weight(
    shape: tuple[int, ...], dtype: str = "float32", rng: init.RNG = None
) -> np.ndarray:
    return init.kaiming_uniform(shape, dtype, rng, a=math.sqrt(5.0))
