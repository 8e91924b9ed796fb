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
    """x if x > 0 else negative_slope * x.

    >>> from asgrad.nn import LeakyReLU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(LeakyReLU(0.1)(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.1..., 0.0, 2.0]
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = bool(inplace)  # ignored: see the module docstring

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")

    def forward(self, x: Tensor) -> Tensor:
        return x.leaky_relu(self.negative_slope)


class GELU(Module):
    """x * Phi(x); ``approximate="tanh"`` for the tanh approximation.

    >>> from asgrad.nn import GELU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(GELU()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.15865..., 0.0, 0.84134...]
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)


class SiLU(Module):
    """x * sigmoid(x); ``inplace`` is accepted and ignored.

    >>> from asgrad.nn import SiLU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(SiLU()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.26894..., 0.0, 0.73105...]
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        return x.silu()


class Tanh(Module):
    """tanh(x).

    >>> from asgrad.nn import Tanh
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Tanh()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.76159..., 0.0, 0.76159...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """1 / (1 + exp(-x)).

    >>> from asgrad.nn import Sigmoid
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Sigmoid()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [0.26894..., 0.5, 0.73105...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1).

    >>> from asgrad.nn import ELU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(ELU()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.63212..., 0.0, 1.0]
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = bool(inplace)  # ignored: see the module docstring

    def forward(self, x: Tensor) -> Tensor:
        return x.elu(self.alpha)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta.

    >>> from asgrad.nn import Softplus
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Softplus()(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [0.31326..., 0.69314..., 1.31326...]
    """

    def __init__(self, beta: float = 1.0) -> None:
        super().__init__()
        self.beta = beta

    def forward(self, x: Tensor) -> Tensor:
        return x.softplus(self.beta)


class Softmax(Module):
    """softmax along ``axis``.

    >>> from asgrad.nn import Softmax
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Softmax(-1)(x), {"x": [0.0, 0.0, 0.0]})[0].tolist()
    [0.33333..., 0.33333..., 0.33333...]
    """

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return x.softmax(self.axis)


class LogSoftmax(Module):
    """log_softmax along ``axis``.

    >>> from asgrad.nn import LogSoftmax
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(LogSoftmax(-1)(x), {"x": [0.0, 0.0, 0.0]})[0].tolist()
    [-1.09861..., -1.09861..., -1.09861...]
    """

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return x.log_softmax(self.axis)


class Identity(Module):
    """Returns its input.

    >>> from asgrad.nn import Identity
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Identity()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.0, 0.0, 2.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x


class Flatten(Module):
    """Flattens axes ``start_axis`` to ``end_axis`` (default: all but the batch axis), as
    PyTorch's ``nn.Flatten(start_dim=1, end_dim=-1)`` (both spellings).

    >>> from asgrad.nn import Flatten
    >>> from asgrad.tensor import Graph
    >>> Flatten()(Graph().input("x", (2, 3, 4))).shape
    (2, 12)
    """

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
    """``x * tanh(softplus(x))``.

    >>> from asgrad.nn import Mish
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Mish()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.30340..., 0.0, 1.94395...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.mish()


class Hardswish(_Pointwise):
    """``x * relu6(x + 3) / 6``.

    >>> from asgrad.nn import Hardswish
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Hardswish()(x), {"x": [-4.0, 0.0, 1.0]})[0].tolist()
    [-0.0, 0.0, 0.66666...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.hardswish()


class Hardsigmoid(_Pointwise):
    """``relu6(x + 3) / 6``.

    >>> from asgrad.nn import Hardsigmoid
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Hardsigmoid()(x), {"x": [-4.0, 0.0, 3.0]})[0].tolist()
    [0.0, 0.5, 1.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.hardsigmoid()


class ReLU6(_Pointwise):
    """``min(max(x, 0), 6)``.

    >>> from asgrad.nn import ReLU6
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(ReLU6()(x), {"x": [-1.0, 3.0, 8.0]})[0].tolist()
    [0.0, 3.0, 6.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.relu6()


class SELU(_Pointwise):
    """``scale * elu(x, alpha)`` with the self-normalising constants.

    >>> from asgrad.nn import SELU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(SELU()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.11133..., 0.0, 2.10140...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.selu()


class Softsign(Module):
    """``x / (1 + |x|)``.

    >>> from asgrad.nn import Softsign
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Softsign()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.5, 0.0, 0.66666...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.softsign()


class LogSigmoid(Module):
    """``log(sigmoid(x))``.

    >>> from asgrad.nn import LogSigmoid
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(LogSigmoid()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.31326..., -0.69314..., -0.12692...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.logsigmoid()


class Tanhshrink(Module):
    """``x - tanh(x)``.

    >>> from asgrad.nn import Tanhshrink
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Tanhshrink()(x), {"x": [0.0, 1.0, 2.0]})[0].tolist()
    [0.0, 0.23840..., 1.03597...]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.tanhshrink()


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``.

    >>> from asgrad.nn import Hardtanh
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Hardtanh()(x), {"x": [-2.0, 0.5, 3.0]})[0].tolist()
    [-1.0, 0.5, 1.0]
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.hardtanh(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    >>> from asgrad.nn import CELU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(CELU()(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.63212..., 0.0, 2.0]
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.celu(self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softshrink(Module):
    """``x`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``.

    >>> from asgrad.nn import Softshrink
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Softshrink()(x), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
    [-1.5, 0.0, 0.5]
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = float(lambd)

    def forward(self, x: Tensor) -> Tensor:
        return x.softshrink(self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(Softshrink):
    """``x`` where ``|x| > lambd``, else 0.

    >>> from asgrad.nn import Hardshrink
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Hardshrink()(x), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
    [-2.0, 0.0, 1.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.hardshrink(self.lambd)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``.

    >>> from asgrad.nn import Threshold
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Threshold(0.5, -1.0)(x), {"x": [0.0, 0.5, 2.0]})[0].tolist()
    [-1.0, -1.0, 2.0]
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = float(threshold), float(value), inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.threshold(self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class GLU(Module):
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of the input along ``dim``.

    >>> from asgrad.nn import GLU
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,), free=())
    >>> evaluate(GLU()(x), {"x": [1.0, 2.0, 0.0, 100.0]})[0].tolist()
    [0.5, 2.0]
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, x: Tensor) -> Tensor:
        return x.glu(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` along ``dim``.

    >>> from asgrad.nn import Softmin
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(Softmin(dim=-1)(x), {"x": [0.0, 0.0, 0.0]})[0].tolist()
    [0.33333..., 0.33333..., 0.33333...]
    """

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
