"""Tensor methods for neural-network ops (activations, norms, pooling...).

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.located import checked
from asgrad.tensor.methods_base import TensorBase
from asgrad.tensor.ops._common import float_arg, normalize_axis

if TYPE_CHECKING:
    from asgrad.tensor.tensor import Tensor


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

    def softmax(self, axis: int = -1) -> Tensor:
        return self._apply("softmax", axis=checked("softmax", normalize_axis, axis, self.ndim))

    def log_softmax(self, axis: int = -1) -> Tensor:
        axis = checked("log_softmax", normalize_axis, axis, self.ndim)
        return self._apply("log_softmax", axis=axis)
