"""Adadelta, Adagrad and Adamax: PyTorch's per-coordinate adaptive rules as graph ops."""

from __future__ import annotations

import math
from collections.abc import Iterable

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Tensor, Variable, maximum, where
from asgrad.tensor.api.nn_functional import adam_ema
from asgrad.tensor.errors import ArgumentError


def check_betas(betas: tuple[float, float]) -> None:
    """Both betas in ``[0, 1)``, or an [`ArgumentError`][asgrad.tensor.ArgumentError]."""
    if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
        raise ArgumentError(f"betas must be in [0, 1), got {betas}")


def check_nonnegative(**values: float) -> None:
    """Every keyword ``>= 0`` (NaN refused), or an [`ArgumentError`][asgrad.tensor.ArgumentError]
    naming it."""
    bad = {k: v for k, v in values.items() if not v >= 0}
    if bad:
        raise ArgumentError(
            ", ".join(f"{k} must be >= 0, got {v!r}" for k, v in bad.items()) + "; pass a number"
        )


def one_minus_power(beta: float, step: Tensor) -> Tensor:
    """``1 - beta**step`` (float64), computed as ``-expm1(step * ln beta)``.

    The direct form loses digits where ``beta**step`` is near 1 and the scalar is
    computed in float32 (on the GPU): ``1 - 0.999**1`` keeps 4 of 7 digits there.
    Below ``|x| = 0.05`` expm1 is its Taylor series to ``x**5`` (error < 3e-11).
    """
    graph = step.graph
    if beta == 0.0:
        return graph.constant(1.0, "float64") + step * 0.0
    x = step * math.log(beta)
    series = x * (1.0 + x * (1.0 / 2 + x * (1.0 / 6 + x * (1.0 / 24 + x / 120))))
    return -where(x > -0.05, series, x.exp() - 1.0)


class Adadelta(Optimizer):
    """``torch.optim.Adadelta`` (Zeiler, 2012) as graph ops; ``lr`` defaults to 1.0.

    With ``g`` the (clipped) gradient::

        g = g + weight_decay * p                     (if weight_decay)
        s = rho * s + (1 - rho) * g**2
        d = sqrt(u + eps) / sqrt(s + eps) * g
        u = rho * u + (1 - rho) * d**2
        p = p - lr * d

    >>> from asgrad.nn import Linear
    >>> Adadelta(Linear(2, 1, rng=0).parameters())
    Adadelta(lr=1.0, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        if not 0.0 <= rho <= 1.0:
            raise ArgumentError(f"rho must be in [0, 1], got {rho}")
        check_nonnegative(eps=eps, weight_decay=weight_decay)
        self.rho, self.eps, self.weight_decay, self.maximize = rho, eps, weight_decay, maximize

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph, rho = param.graph, self.rho
        if self.maximize:
            g = -g
        if self.weight_decay:
            g = g + param * self.weight_decay
        sq_var, acc_var = self.slot("square_avg", var), self.slot("acc_delta", var)
        sq = self.assign(sq_var, graph.bind(sq_var) * rho + g * g * (1.0 - rho))
        acc = graph.bind(acc_var)
        delta = (acc + self.eps).sqrt() / (sq + self.eps).sqrt() * g
        self.assign(acc_var, acc * rho + delta * delta * (1.0 - rho))
        return param - self.lr_tensor(param) * delta


class Adagrad(Optimizer):
    """``torch.optim.Adagrad`` (Duchi et al., 2011) as graph ops.

    With ``g`` the (clipped) gradient and ``t`` the step number::

        g = g + weight_decay * p                     (if weight_decay)
        s = s + g**2                                 (s starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    >>> from asgrad.nn import Linear
    >>> Adagrad(Linear(2, 1, rng=0).parameters(), lr_decay=0.01)
    Adagrad(lr=0.01, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        check_nonnegative(
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        self.lr_decay, self.weight_decay, self.eps = lr_decay, weight_decay, eps
        self.initial_accumulator_value, self.maximize = initial_accumulator_value, maximize

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph = param.graph
        if self.maximize:
            g = -g
        if self.weight_decay:
            g = g + param * self.weight_decay
        decay = self.lr_decay
        clr = self.per_step(
            "adagrad_lr",
            lambda: graph.bind(self._lr) / (1.0 + (step - 1.0) * decay),
            param.dtype,
        )
        sum_var = self.slot("sum", var, fill=self.initial_accumulator_value)
        total = graph.bind(sum_var) + g * g
        total = self.assign(sum_var, total)
        return param - clr * g / (total.sqrt() + self.eps)


class Adamax(Optimizer):
    """``torch.optim.Adamax`` (Adam with the infinity norm, Kingma & Ba 2015).

    With ``g`` the (clipped) gradient and ``t`` the step number::

        g = g + weight_decay * p                     (if weight_decay)
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    >>> from asgrad.nn import Linear
    >>> Adamax(Linear(2, 1, rng=0).parameters())
    Adamax(lr=0.002, params=2)
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        super().__init__(params, lr, clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value)
        check_betas(betas)
        check_nonnegative(eps=eps, weight_decay=weight_decay)
        self.betas, self.eps, self.weight_decay, self.maximize = betas, eps, weight_decay, maximize

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        graph = param.graph
        b1, b2 = self.betas
        if self.maximize:
            g = -g
        if self.weight_decay:
            g = g + param * self.weight_decay
        clr = self.per_step(
            "adamax_lr",
            lambda: graph.bind(self._lr) / one_minus_power(b1, step),
            param.dtype,
        )
        m_var, u_var = self.slot("exp_avg", var), self.slot("exp_inf", var)
        m = adam_ema(graph.bind(m_var), g, b1)
        u = maximum(graph.bind(u_var) * b2, g.abs() + self.eps)
        m = self.assign(m_var, m)
        u = self.assign(u_var, u)
        return param - clr * m / u
