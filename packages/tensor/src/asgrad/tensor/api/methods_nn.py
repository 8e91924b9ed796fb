"""Tensor methods for neural-network ops (activations, norms, pooling...).

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.located import checked
from asgrad.tensor.api.methods_base import TensorBase
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.common import float_arg, normalize_axis

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


class NNMethods(TensorBase):
    """Tensor methods for neural-network ops (activations, norms, pooling...)."""

    __slots__ = ()

    def relu(self) -> Tensor:
        """``max(x, 0)`` elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.relu(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [0.0, 0.0, 2.0]

        """
        return self._apply("relu")

    def leaky_relu(self, alpha: float = 0.01) -> Tensor:
        """``x`` where positive, ``alpha * x`` elsewhere.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.leaky_relu(0.1), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-0.1..., 0.0, 2.0]

        """
        return self._apply("leaky_relu", alpha=checked("leaky_relu", float_arg, alpha, "alpha"))

    def gelu(self, approximate: str = "none") -> Tensor:
        """``x * Phi(x)``, Phi the standard normal CDF; ``approximate="tanh"``: its tanh
        formula.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.gelu(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [-0.15865..., 0.0, 0.84134...]
        """
        if approximate not in ("none", "tanh"):
            raise ArgumentError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        return self._apply("gelu", approximate=approximate)

    def silu(self) -> Tensor:
        """``x * sigmoid(x)`` (swish).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.silu(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [-0.26894..., 0.0, 0.73105...]
        """
        return self._apply("silu")

    def elu(self, alpha: float = 1.0) -> Tensor:
        """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.elu(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [-0.63212..., 0.0, 1.0]
        """
        return self._apply("elu", alpha=checked("elu", float_arg, alpha, "alpha"))

    def softplus(self, beta: float = 1.0) -> Tensor:
        """``log(1 + exp(beta * x)) / beta``: a smooth ReLU.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.softplus(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [0.31326..., 0.69314..., 1.31326...]
        """
        return self._apply("softplus", beta=checked("softplus", float_arg, beta, "beta"))

    def softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``exp(x)`` normalized to sum to 1 along ``axis`` (default the last; ``dim``:
        PyTorch's name).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.softmax(0).sum(0), feed)[0].tolist()
        [1.0, 1.0, 1.0]
        >>> x.softmax(dim=1).shape
        (2, 3)
        """
        given = axis_arg("softmax", axis, dim, -1)
        return self._apply("softmax", axis=checked("softmax", normalize_axis, given, self.ndim))

    def log_softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``log(softmax(x))`` along ``axis`` (default the last; ``dim``: PyTorch's name),
        computed without overflow.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.log_softmax(dim=1).shape
        (2, 3)
        """
        axis = checked(
            "log_softmax", normalize_axis, axis_arg("log_softmax", axis, dim, -1), self.ndim
        )
        return self._apply("log_softmax", axis=axis)

    # -- activations that expand into other ops (tensor/ops/elementwise_activation.py) --
    def mish(self) -> Tensor:
        """``x * tanh(softplus(x))`` (Misra, 2019).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.mish(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-0.30340..., 0.0, 1.94395...]
        """
        return self._apply("mish")

    def hardswish(self) -> Tensor:
        """``x * relu6(x + 3) / 6`` (MobileNetV3).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.hardswish(), {"x": [-4.0, 0.0, 1.0]})[0].tolist()
        [-0.0, 0.0, 0.66666...]
        """
        return self._apply("hardswish")

    def hardsigmoid(self) -> Tensor:
        """``relu6(x + 3) / 6``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.hardsigmoid(), {"x": [-4.0, 0.0, 3.0]})[0].tolist()
        [0.0, 0.5, 1.0]
        """
        return self._apply("hardsigmoid")

    def relu6(self) -> Tensor:
        """``min(max(x, 0), 6)``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.relu6(), {"x": [-1.0, 3.0, 8.0]})[0].tolist()
        [0.0, 3.0, 6.0]
        """
        return self._apply("relu6")

    def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
        """``x`` clamped to ``[min_val, max_val]``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.hardtanh(), {"x": [-2.0, 0.5, 3.0]})[0].tolist()
        [-1.0, 0.5, 1.0]
        """
        lo = checked("hardtanh", float_arg, min_val, "min_val")
        hi = checked("hardtanh", float_arg, max_val, "max_val")
        return self._apply("hardtanh", min_val=lo, max_val=hi)

    def selu(self) -> Tensor:
        """``scale * elu(x, alpha)`` with the self-normalising constants.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.selu(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-1.11133..., 0.0, 2.10140...]
        """
        return self._apply("selu")

    def celu(self, alpha: float = 1.0) -> Tensor:
        """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.celu(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-0.63212..., 0.0, 2.0]
        """
        return self._apply("celu", alpha=checked("celu", float_arg, alpha, "alpha"))

    def softsign(self) -> Tensor:
        """``x / (1 + |x|)``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.softsign(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-0.5, 0.0, 0.66666...]
        """
        return self._apply("softsign")

    def logsigmoid(self) -> Tensor:
        """``log(sigmoid(x))``, without overflow at large ``|x|``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.logsigmoid(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-1.31326..., -0.69314..., -0.12692...]
        """
        return self._apply("logsigmoid")

    def tanhshrink(self) -> Tensor:
        """``x - tanh(x)``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.tanhshrink(), {"x": [0.0, 1.0, 2.0]})[0].tolist()
        [0.0, 0.23840..., 1.03597...]
        """
        return self._apply("tanhshrink")

    def softshrink(self, lambd: float = 0.5) -> Tensor:
        """``x`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.softshrink(), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
        [-1.5, 0.0, 0.5]
        """
        return self._apply("softshrink", lambd=checked("softshrink", float_arg, lambd, "lambd"))

    def hardshrink(self, lambd: float = 0.5) -> Tensor:
        """``x`` where ``|x| > lambd``, else 0.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.hardshrink(), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
        [-2.0, 0.0, 1.0]
        """
        return self._apply("hardshrink", lambd=checked("hardshrink", float_arg, lambd, "lambd"))

    def threshold(self, threshold: float, value: float) -> Tensor:
        """``x`` where ``x > threshold``, else ``value``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.threshold(0.5, -1.0), {"x": [0.0, 0.5, 2.0]})[0].tolist()
        [-1.0, -1.0, 2.0]
        """
        t = checked("threshold", float_arg, threshold, "threshold")
        return self._apply(
            "threshold", threshold=t, value=checked("threshold", float_arg, value, "value")
        )

    def glu(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``x`` along ``axis``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 4))
        >>> x.glu().shape
        (2, 2)
        """
        given = axis_arg("glu", axis, dim, -1)
        return self._apply("glu", axis=checked("glu", normalize_axis, given, self.ndim))

    def softmin(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``softmax(-x)``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.softmin(1).shape
        (2, 3)
        """
        return self._apply("neg").softmax(axis_arg("softmin", axis, dim, -1))
