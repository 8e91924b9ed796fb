"""Activation modules: thin wrappers over the Tensor methods.

Where PyTorch's module takes ``inplace`` (``ReLU``, ``LeakyReLU``, ``ELU``, ``SiLU``;
``Dropout`` too), asgrad's takes it as well and ignores it: a graph op never
overwrites its input (the compiler reuses buffers itself), so ``nn.ReLU(True)`` and
``nn.ReLU()`` compute the same. The flag is kept and shown in the ``repr``.
"""

from __future__ import annotations

from asgrad.nn.module import Module
from asgrad.tensor import Tensor


class ReLU(Module):
    """max(x, 0); ``inplace`` is accepted and ignored (see the module docstring).

    >>> ReLU(True)
    ReLU(inplace=True)
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = bool(inplace)  # ignored: see the module docstring

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")

    def forward(self, x: Tensor) -> Tensor:
        return x.leaky_relu(self.negative_slope)


class GELU(Module):
    """x * Phi(x); ``approximate="tanh"`` for the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)


class SiLU(Module):
    """x * sigmoid(x); ``inplace`` is accepted and ignored."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        return x.silu()


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = bool(inplace)  # ignored: see the module docstring

    def forward(self, x: Tensor) -> Tensor:
        return x.elu(self.alpha)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta."""

    def __init__(self, beta: float = 1.0) -> None:
        super().__init__()
        self.beta = beta

    def forward(self, x: Tensor) -> Tensor:
        return x.softplus(self.beta)


class Softmax(Module):
    """softmax along ``axis``."""

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return x.softmax(self.axis)


class LogSoftmax(Module):
    """log_softmax along ``axis``."""

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return x.log_softmax(self.axis)


class Identity(Module):
    """Returns its input."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Flatten(Module):
    """Flattens every axis from ``start_axis`` on (default: all but the batch axis)."""

    def __init__(self, start_axis: int = 1) -> None:
        super().__init__()
        self.start_axis = start_axis

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_axis)
