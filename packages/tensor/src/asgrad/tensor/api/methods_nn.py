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
        return self._apply("relu")

    def leaky_relu(self, alpha: float = 0.01) -> Tensor:
        return self._apply("leaky_relu", alpha=checked("leaky_relu", float_arg, alpha, "alpha"))

    def gelu(self, approximate: str = "none") -> Tensor:
        if approximate not in ("none", "tanh"):
            raise ArgumentError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        return self._apply("gelu", approximate=approximate)

    def silu(self) -> Tensor:
        return self._apply("silu")

    def elu(self, alpha: float = 1.0) -> Tensor:
        return self._apply("elu", alpha=checked("elu", float_arg, alpha, "alpha"))

    def softplus(self, beta: float = 1.0) -> Tensor:
        return self._apply("softplus", beta=checked("softplus", float_arg, beta, "beta"))

    def softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        given = axis_arg("softmax", axis, dim, -1)
        return self._apply("softmax", axis=checked("softmax", normalize_axis, given, self.ndim))

    def log_softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        axis = checked(
            "log_softmax", normalize_axis, axis_arg("log_softmax", axis, dim, -1), self.ndim
        )
        return self._apply("log_softmax", axis=axis)

    # -- activations that expand into other ops (tensor/ops/elementwise_activation.py) --
    def mish(self) -> Tensor:
        """``x * tanh(softplus(x))`` (Misra, 2019)."""
        return self._apply("mish")

    def hardswish(self) -> Tensor:
        """``x * relu6(x + 3) / 6`` (MobileNetV3)."""
        return self._apply("hardswish")

    def hardsigmoid(self) -> Tensor:
        """``relu6(x + 3) / 6``."""
        return self._apply("hardsigmoid")

    def relu6(self) -> Tensor:
        """``min(max(x, 0), 6)``."""
        return self._apply("relu6")

    def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
        """``x`` clamped to ``[min_val, max_val]``."""
        lo = checked("hardtanh", float_arg, min_val, "min_val")
        hi = checked("hardtanh", float_arg, max_val, "max_val")
        return self._apply("hardtanh", min_val=lo, max_val=hi)

    def selu(self) -> Tensor:
        """``scale * elu(x, alpha)`` with the self-normalising constants."""
        return self._apply("selu")

    def celu(self, alpha: float = 1.0) -> Tensor:
        """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
        return self._apply("celu", alpha=checked("celu", float_arg, alpha, "alpha"))

    def softsign(self) -> Tensor:
        """``x / (1 + |x|)``."""
        return self._apply("softsign")

    def logsigmoid(self) -> Tensor:
        """``log(sigmoid(x))``, without overflow at large ``|x|``."""
        return self._apply("logsigmoid")

    def tanhshrink(self) -> Tensor:
        """``x - tanh(x)``."""
        return self._apply("tanhshrink")

    def softshrink(self, lambd: float = 0.5) -> Tensor:
        """``x`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``."""
        return self._apply("softshrink", lambd=checked("softshrink", float_arg, lambd, "lambd"))

    def hardshrink(self, lambd: float = 0.5) -> Tensor:
        """``x`` where ``|x| > lambd``, else 0."""
        return self._apply("hardshrink", lambd=checked("hardshrink", float_arg, lambd, "lambd"))

    def threshold(self, threshold: float, value: float) -> Tensor:
        """``x`` where ``x > threshold``, else ``value``."""
        t = checked("threshold", float_arg, threshold, "threshold")
        return self._apply(
            "threshold", threshold=t, value=checked("threshold", float_arg, value, "value")
        )

    def glu(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``x`` along ``axis``."""
        given = axis_arg("glu", axis, dim, -1)
        return self._apply("glu", axis=checked("glu", normalize_axis, given, self.ndim))

    def softmin(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """``softmax(-x)``."""
        return self._apply("neg").softmax(axis_arg("softmin", axis, dim, -1))
