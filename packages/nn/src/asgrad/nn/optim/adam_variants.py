"""NAdam and RAdam: Adam with Nesterov momentum, and Adam with a rectified variance."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from asgrad.nn.optim.adaptive import check_betas, check_nonnegative, one_minus_power
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable, maximum, where
from asgrad.tensor.api.nn_functional import adam_ema


class _AdamFamily(Optimizer):
    """Shared arguments: betas, eps, weight decay (L2 or decoupled), maximize."""

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float,
        betas: tuple[float, float],
        eps: float,
        weight_decay: float,
        decoupled_weight_decay: bool,
        maximize: bool,
        clip_grad_norm: float | None,
        clip_grad_value: float | None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        check_betas(betas)
        check_nonnegative(eps=eps, weight_decay=weight_decay)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay
        self.decoupled_weight_decay, self.maximize = decoupled_weight_decay, maximize

    def _moments(
        self, param: Tensor, g: Tensor, var: Variable
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(param after a decoupled decay, the gradient used, m, v); state assigned."""
        graph = param.graph
        b1, b2 = self.betas
        if self.maximize:
            g = -g
        if self.weight_decay and self.decoupled_weight_decay:
            wd = self.weight_decay
            shrink = self.per_step(
                "decoupled_decay", lambda: 1.0 - graph.bind(self._lr) * wd, param.dtype
            )
            param = param * shrink
        elif self.weight_decay:
            g = g + param * self.weight_decay
        m_var, v_var = self.slot("exp_avg", var), self.slot("exp_avg_sq", var)
        m = adam_ema(graph.bind(m_var), g, b1)
        v = adam_ema(graph.bind(v_var), g, b2, square=True)
        m = self.assign(m_var, m)
        v = self.assign(v_var, v)
        return param, g, m, v


class NAdam(_AdamFamily):
    """``torch.optim.NAdam`` (Dozat, 2016): Adam with Nesterov momentum.

    With ``g`` the (clipped) gradient, ``t`` the step and ``mu_t = beta1 * (1 - 0.5 *
    0.96 ** (t * momentum_decay))``, ``P_t = mu_1 * ... * mu_t`` (kept in the state)::

        m, v as Adam's;  d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - P_t) * g / d
              - lr * mu_{t+1} / (1 - P_t * mu_{t+1}) * m / d

    ``decoupled_weight_decay=True`` shrinks ``p`` by ``1 - lr * weight_decay`` first
    (NAdamW) instead of adding ``weight_decay * p`` to ``g``.

    >>> from asgrad.nn import Linear
    >>> NAdam(Linear(2, 1, rng=0).parameters())
    NAdam(lr=0.002, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        *,
        decoupled_weight_decay: bool = False,
        maximize: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            decoupled_weight_decay,
            maximize,
            clip_grad_norm,
            clip_grad_value,
        )
        check_nonnegative(momentum_decay=momentum_decay)
        self.momentum_decay = momentum_decay
        self.mu_product = Variable("optimizer.mu_product", np.array(1.0), trainable=False)

    def _mu(self, step: Tensor) -> Tensor:
        b1, decay = self.betas[0], self.momentum_decay
        return b1 * (1.0 - 0.5 * step.graph.constant(0.96, "float64") ** (step * decay))

    def _product(self, step: Tensor) -> Tensor:
        product = step.graph.bind(self.mu_product) * self._mu(step)
        self.assign(self.mu_product, product)  # once per compiled step (per_step)
        return product

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph, dt = param.graph, param.dtype
        b2 = self.betas[1]
        lr = graph.bind(self._lr)
        product = self.per_step("nadam_mu_product", lambda: self._product(step), "float64")
        g_scale = self.per_step(
            "nadam_grad_scale", lambda: lr * (1.0 - self._mu(step)) / (1.0 - product), dt
        )
        m_scale = self.per_step(
            "nadam_avg_scale",
            lambda: lr * self._mu(step + 1.0) / (1.0 - product * self._mu(step + 1.0)),
            dt,
        )
        bc2 = self.per_step("nadam_bias_correction2", lambda: one_minus_power(b2, step), dt)
        param, g, m, v = self._moments(param, g, var)
        d = (v / bc2).sqrt() + self.eps
        return param - g_scale * g / d - m_scale * m / d

    def state_dict(self) -> dict[str, Any]:
        """The base state plus ``mu_product`` (the running product of the ``mu_t``)."""
        return {**super().state_dict(), "mu_product": float(self.mu_product.value)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rest = {k: v for k, v in state.items() if k != "mu_product"}
        super().load_state_dict(rest)
        self.mu_product.value = np.array(float(state.get("mu_product", 1.0)))


class RAdam(_AdamFamily):
    """``torch.optim.RAdam`` (Liu et al., 2020): Adam whose adaptive step is switched on
    once the variance of its estimate is tractable.

    With ``rho_inf = 2 / (1 - beta2) - 1`` and ``rho_t = rho_inf - 2 t beta2**t / (1 -
    beta2**t)``::

        m, v as Adam's;  m_hat = m / (1 - beta1**t)
        p = p - lr * m_hat * r_t * sqrt(1 - beta2**t) / (sqrt(v) + eps)   (rho_t > 5)
        p = p - lr * m_hat                                                  (otherwise)

    where ``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``.
    ``decoupled_weight_decay`` as [`NAdam`][asgrad.nn.NAdam]'s.

    >>> from asgrad.nn import Linear
    >>> RAdam(Linear(2, 1, rng=0).parameters())
    RAdam(lr=0.001, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        decoupled_weight_decay: bool = False,
        maximize: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            decoupled_weight_decay,
            maximize,
            clip_grad_norm,
            clip_grad_value,
        )

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph, dt = param.graph, param.dtype
        b1, b2 = self.betas
        rho_inf = 2.0 / (1.0 - b2) - 1.0

        def rho_t() -> Tensor:
            bc2 = one_minus_power(b2, step)
            return rho_inf - 2.0 * step * (1.0 - bc2) / bc2

        def on() -> Tensor:
            return (self.per_step("radam_rho_t", rho_t, "float64") > 5.0).cast("float64")

        def rect() -> Tensor:
            if rho_inf <= 5.0:  # rho_t < rho_inf: never rectified (and 0 / 0 below)
                return graph.constant(0.0, "float64")
            rho = self.per_step("radam_rho_t", rho_t, "float64")
            ratio = (rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)
            # The rectified step's factor, 0 while rho_t <= 5 (ratio may be < 0 there).
            bc2_sqrt = one_minus_power(b2, step).sqrt()
            return where(rho > 5.0, maximum(ratio, 0.0).sqrt() * bc2_sqrt, 0.0)

        step_size = self.per_step(
            "radam_step_size",
            lambda: graph.bind(self._lr) / one_minus_power(b1, step),
            dt,
        )
        adaptive = self.per_step("radam_adaptive", rect, dt)
        plain = self.per_step("radam_plain", lambda: 1.0 - on(), dt)
        param, _, m, v = self._moments(param, g, var)
        return param - step_size * m * (adaptive / (v.sqrt() + self.eps) + plain)
