"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable, where
from asgrad.tensor.errors import ArgumentError


class SGD(Optimizer):
    """PyTorch's SGD (``torch.optim.SGD``), as graph ops.

    With ``g`` the (clipped) gradient::

        g = g + weight_decay * p                        (if weight_decay)
        b = momentum * b + (1 - dampening) * g          (b = g on the first step)
        g = g + momentum * b  if nesterov  else  b      (if momentum)
        p = p - lr * g

    >>> from asgrad.nn import Linear
    >>> SGD(Linear(2, 1, rng=0).parameters(), lr=0.1, momentum=0.9, nesterov=True)
    SGD(lr=0.1, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 0.01,
        momentum: float = 0.0,
        *,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        if momentum < 0:
            raise ArgumentError(f"momentum must be >= 0, got {momentum}")
        if weight_decay < 0:
            raise ArgumentError(f"weight_decay must be >= 0, got {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ArgumentError("Nesterov momentum needs momentum > 0 and no dampening")
        self.momentum, self.nesterov = momentum, nesterov
        self.weight_decay, self.dampening = weight_decay, dampening

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        if self.weight_decay:
            g = g + param * self.weight_decay
        if self.momentum:
            buf_var = self.slot("momentum_buffer", var)
            buf = param.graph.bind(buf_var)
            if self.dampening:
                # PyTorch starts the buffer at the first gradient, undampened.
                coef = self.per_step(
                    "sgd_grad_coef",
                    lambda: where(
                        step == 1.0, step.graph.constant(1.0, "float64"), 1.0 - self.dampening
                    ),
                    param.dtype,
                )
                new_buf = buf * self.momentum + g * coef
            else:
                new_buf = buf * self.momentum + g  # buf is 0 on the first step
            new_buf = self.assign(buf_var, new_buf)
            g = g + new_buf * self.momentum if self.nesterov else new_buf
        return param - self.lr_tensor(param) * g
