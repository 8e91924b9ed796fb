"""More activation modules, in PyTorch's names: thin wrappers over the Tensor methods.

``inplace`` is accepted where PyTorch has it and ignored: a graph never overwrites a
value (see :mod:`asgrad.tensor.api.nn_activation`).
"""

from __future__ import annotations

import numpy as np

from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.nn_activation import prelu

__all__ = [
    "CELU",
    "GLU",
    "SELU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LogSigmoid",
    "Mish",
    "PReLU",
    "ReLU6",
    "Softmin",
    "Softshrink",
    "Softsign",
    "Tanhshrink",
    "Threshold",
]


class _Pointwise(Module):
    """An activation without parameters or options."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Mish(_Pointwise):
    """``x * tanh(softplus(x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.mish()


class Hardswish(_Pointwise):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.hardswish()


class Hardsigmoid(_Pointwise):
    """``relu6(x + 3) / 6``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.hardsigmoid()


class ReLU6(_Pointwise):
    """``min(max(x, 0), 6)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu6()


class SELU(_Pointwise):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""

    def forward(self, x: Tensor) -> Tensor:
        return x.selu()


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.softsign()


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.logsigmoid()


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanhshrink()


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.hardtanh(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.celu(self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softshrink(Module):
    """``x`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = float(lambd)

    def forward(self, x: Tensor) -> Tensor:
        return x.softshrink(self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(Softshrink):
    """``x`` where ``|x| > lambd``, else 0."""

    def forward(self, x: Tensor) -> Tensor:
        return x.hardshrink(self.lambd)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = float(threshold), float(value), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.threshold(self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class GLU(Module):
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of the input along ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, x: Tensor) -> Tensor:
        return x.glu(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` along ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, x: Tensor) -> Tensor:
        return x.softmin(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """``x`` if ``x >= 0`` else ``weight * x``, with a learned ``weight``: one for all
    channels (``num_parameters=1``) or one per channel (axis 1), starting at ``init``.

    >>> from asgrad.tensor import Graph
    >>> PReLU(3)(Graph().input("x", (2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, *, dtype: str = "float32"
    ) -> None:
        super().__init__()
        # (``num_parameters`` is Module's method counting parameters)
        self.channels = int(num_parameters)
        self.weight = Parameter(np.full((self.channels,), init, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        return prelu(x, x.graph.bind(self.weight))

    def extra_repr(self) -> str:
        return f"num_parameters={self.channels}"
