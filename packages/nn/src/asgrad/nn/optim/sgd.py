"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable


class SGD(Optimizer):
    """PyTorch's SGD: ``v = momentum * v + g (+ wd * p)``; ``p -= lr * v``.

    With ``nesterov=True`` the step is ``p -= lr * (g + momentum * v)``.
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
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and no dampening")
        self.momentum, self.nesterov = momentum, nesterov
        self.weight_decay, self.dampening = weight_decay, dampening

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        if self.weight_decay:
            g = g + param * self.weight_decay
        if self.momentum:
            buf_var = self.slot("momentum_buffer", var)
            buf = param.graph.bind(buf_var)
            # PyTorch starts the buffer at the first gradient, undampened.
            first = (step == 1.0).cast(g.dtype)
            damp = 1.0 - self.dampening
            new_buf = buf * self.momentum + g * (first * (1.0 - damp) + damp)
            self.assign(buf_var, new_buf)
            g = g + new_buf * self.momentum if self.nesterov else new_buf
        return param - self.lr_tensor(param) * g
