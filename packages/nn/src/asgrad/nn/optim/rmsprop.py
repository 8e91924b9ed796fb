"""RMSprop (Hinton's lecture 6e), centered and with momentum, as PyTorch's."""

from __future__ import annotations

from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable
from asgrad.tensor.errors import ArgumentError


class RMSprop(Optimizer):
    """``torch.optim.RMSprop`` as graph ops.

    With ``g`` the (clipped) gradient::

        g = g + weight_decay * p                      (if weight_decay)
        s = alpha * s + (1 - alpha) * g**2
        a = a + (1 - alpha) * (g - a)                 (centered only)
        d = sqrt(s - a**2) if centered else sqrt(s); d = d + eps
        b = momentum * b + g / d;  p = p - lr * b     (momentum > 0)
        p = p - lr * g / d                            (otherwise)

    >>> from asgrad.nn import Linear
    >>> RMSprop(Linear(2, 1, rng=0).parameters(), lr=0.01, centered=True)
    RMSprop(lr=0.01, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        if not 0.0 <= alpha <= 1.0:
            raise ArgumentError(f"alpha must be in [0, 1], got {alpha}")
        if eps < 0 or weight_decay < 0 or momentum < 0:
            raise ArgumentError(
                "eps, weight_decay and momentum must be >= 0,"
                f" got {eps}, {weight_decay}, {momentum}"
            )
        self.alpha, self.eps, self.weight_decay = alpha, eps, weight_decay
        self.momentum, self.centered = momentum, centered

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph = param.graph
        if self.weight_decay:
            g = g + param * self.weight_decay
        sq_var = self.slot("square_avg", var)
        sq = graph.bind(sq_var) * self.alpha + g * g * (1.0 - self.alpha)
        sq = self.assign(sq_var, sq)
        if self.centered:
            ga_var = self.slot("grad_avg", var)
            ga = graph.bind(ga_var)
            ga = ga + (g - ga) * (1.0 - self.alpha)
            ga = self.assign(ga_var, ga)
            avg = (sq - ga * ga).sqrt() + self.eps
        else:
            avg = sq.sqrt() + self.eps
        lr = self.lr_tensor(param)
        if self.momentum:
            buf_var = self.slot("momentum_buffer", var)
            buf = graph.bind(buf_var) * self.momentum + g / avg
            buf = self.assign(buf_var, buf)
            return param - lr * buf
        return param - lr * g / avg
