"""Adam and AdamW."""

from __future__ import annotations

from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable, maximum
from asgrad.tensor.api.nn_functional import adam_ema, adam_update
from asgrad.tensor.errors import ArgumentError


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) as ``torch.optim.Adam``; L2 ``weight_decay``.

    With ``g`` the (clipped) gradient and ``t`` the step number::

        g = g + weight_decay * p                     (Adam with weight_decay)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        v_hat = max(v_hat, v)                        (amsgrad; v_hat is used below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    The two bias corrections and ``lr / (1 - beta1**t)`` are per-step scalars built
    once per compiled step and shared by every parameter. The per-parameter part is
    three ops of `asgrad.tensor.api.nn_functional`, one kernel each: ``adam_ema`` for
    each moment and ``adam_update`` for the step.

    >>> from asgrad.nn import Linear
    >>> Adam(Linear(2, 1, rng=0).parameters(), lr=1e-3)
    Adam(lr=0.001, params=2)
    """

    decoupled = False
    # ``weight_decay=None`` takes this: 0 for Adam, 0.01 for AdamW (PyTorch's defaults).
    default_weight_decay = 0.0

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float | None = None,
        *,
        amsgrad: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        if weight_decay is None:
            weight_decay = self.default_weight_decay
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ArgumentError(f"betas must be in [0, 1), got {betas}")
        if eps < 0 or weight_decay < 0:
            raise ArgumentError(f"eps and weight_decay must be >= 0, got {eps}, {weight_decay}")
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay
        self.amsgrad = amsgrad

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        b1, b2 = self.betas
        dt = param.dtype
        graph = param.graph
        step_size = self.per_step(
            "adam_step_size",
            lambda: graph.bind(self._lr) / (1.0 - graph.constant(b1, "float64") ** step),
            dt,
        )
        bc2_sqrt = self.per_step(
            "adam_bias_correction2_sqrt",
            lambda: (1.0 - graph.constant(b2, "float64") ** step).sqrt(),
            dt,
        )
        if self.weight_decay and not self.decoupled:
            g = g + param * self.weight_decay
        decay: Tensor | None = None
        if self.weight_decay and self.decoupled:
            wd = self.weight_decay
            decay = self.per_step("adamw_decay", lambda: 1.0 - graph.bind(self._lr) * wd, dt)
        m_var, v_var = self.slot("exp_avg", var), self.slot("exp_avg_sq", var)
        # One op (one kernel) per moment and one for the step.
        m = adam_ema(graph.bind(m_var), g, b1)
        v = adam_ema(graph.bind(v_var), g, b2, square=True)
        m = self.assign(m_var, m)
        v = self.assign(v_var, v)
        if self.amsgrad:
            vmax_var = self.slot("max_exp_avg_sq", var)
            v = maximum(graph.bind(vmax_var), v)
            v = self.assign(vmax_var, v)
        return adam_update(param, m, v, step_size, bc2_sqrt, decay, eps=self.eps)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as ``torch.optim.AdamW``.

    The parameter first shrinks, ``p = p * (1 - lr * weight_decay)``, then takes the
    Adam step; ``weight_decay`` defaults to 0.01.

    >>> from asgrad.nn import AdamW, Linear
    >>> AdamW(Linear(2, 1, rng=0).parameters(), lr=1e-3)
    AdamW(lr=0.001, params=2)
    """

    decoupled = True
    default_weight_decay = 0.01
