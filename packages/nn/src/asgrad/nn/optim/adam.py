"""Adam and AdamW."""

from __future__ import annotations

from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with bias correction; L2 ``weight_decay`` as PyTorch's."""

    decoupled = False

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        b1, b2 = self.betas
        lr = self.lr_tensor(param)
        if self.weight_decay and not self.decoupled:
            g = g + param * self.weight_decay
        m_var, v_var = self.slot("exp_avg", var), self.slot("exp_avg_sq", var)
        m = param.graph.bind(m_var) * b1 + g * (1.0 - b1)
        v = param.graph.bind(v_var) * b2 + g * g * (1.0 - b2)
        self.assign(m_var, m)
        self.assign(v_var, v)
        t = step.cast(param.dtype)
        correction1 = 1.0 - param.graph.constant(b1, param.dtype) ** t
        correction2 = 1.0 - param.graph.constant(b2, param.dtype) ** t
        denom = (v / correction2).sqrt() + self.eps
        new = param - lr * (m / correction1) / denom
        if self.weight_decay and self.decoupled:
            new = new - lr * self.weight_decay * param
        return new


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019); default 0.01."""

    decoupled = True

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        *,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            clip_grad_norm=clip_grad_norm,
            clip_grad_value=clip_grad_value,
        )
