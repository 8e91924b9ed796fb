"""Activation modules, in PyTorch's names: thin wrappers over the Tensor methods.

Where PyTorch's module takes ``inplace`` (``ReLU``, ``LeakyReLU``, ``ELU``, ``SiLU``,
``Mish``, ``Hardtanh`` and others; ``Dropout`` too), asgrad's takes it as well and
ignores it: a graph op never overwrites its input (the compiler reuses buffers
itself), so ``nn.ReLU(True)`` and ``nn.ReLU()`` compute the same. The flag is kept
as an attribute; ``ReLU``, ``LeakyReLU``, ``ELU`` and ``SiLU`` show it in their ``repr``.
"""

from __future__ import annotations

import numpy as np

from asgrad.nn.module import Module, Parameter
from asgrad.tensor import Tensor
from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.nn_activation import prelu


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
    """Flattens axes ``start_axis`` to ``end_axis`` (default: all but the batch axis), as
    PyTorch's ``nn.Flatten(start_dim=1, end_dim=-1)`` (both spellings)."""

    def __init__(
        self,
        start_axis: int | None = None,
        end_axis: int | None = None,
        *,
        start_dim: int | None = None,
        end_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.start_axis: int = axis_arg("Flatten", start_axis, start_dim, 1)
        self.end_axis: int = axis_arg("Flatten", end_axis, end_dim, -1)

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_axis, self.end_axis)


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
