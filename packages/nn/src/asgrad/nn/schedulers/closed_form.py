"""Closed-form schedules: step, exponential, cosine, linear warmup, warmup + cosine."""

from __future__ import annotations

import math

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.nn.schedulers.base import LRScheduler
from asgrad.tensor.errors import ArgumentError

__all__ = ["CosineAnnealingLR", "ExponentialLR", "LinearWarmup", "StepLR", "WarmupCosine"]


class StepLR(LRScheduler):
    """``base_lr * gamma ** (t // step_size)``, as ``torch.optim.lr_scheduler.StepLR``.

    >>> from asgrad.nn import SGD, Linear, StepLR
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = StepLR(opt, step_size=2, gamma=0.5)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(opt.lr, 4))  # a compiled step would run here
    ...     sched.step()
    >>> rates
    [1.0, 1.0, 0.5, 0.5]
    """

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if step_size < 1:
            raise ArgumentError(f"step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma ** (epoch // self.step_size)


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** t``, as ``torch.optim.lr_scheduler.ExponentialLR``.

    >>> from asgrad.nn import SGD, Linear, ExponentialLR
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = ExponentialLR(opt, gamma=0.5)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(opt.lr, 4))  # a compiled step would run here
    ...     sched.step()
    >>> rates
    [1.0, 0.5, 0.25, 0.125]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    The closed form of ``torch.optim.lr_scheduler.CosineAnnealingLR``; past
    ``T_max`` the cosine keeps going (the rate rises again), exactly as PyTorch's.

    >>> from asgrad.nn import SGD, Linear, CosineAnnealingLR
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = CosineAnnealingLR(opt, T_max=2)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(opt.lr, 4))  # a compiled step would run here
    ...     sched.step()
    >>> rates
    [1.0, 0.5, 0.0, 0.5]
    """

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:  # PyTorch's name
        if T_max < 1:
            raise ArgumentError(f"T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return (
            self.eta_min
            + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        )


def _warmup_factor(epoch: int, warmup_steps: int, start_factor: float) -> float:
    if warmup_steps == 0 or epoch >= warmup_steps:
        return 1.0
    return start_factor + (1.0 - start_factor) * epoch / warmup_steps


class LinearWarmup(LRScheduler):
    """Linear warmup: ``base_lr * (s + (1 - s) * min(t, warmup_steps) / warmup_steps)``.

    ``s`` is ``start_factor``: the first step runs at ``s * base_lr`` and step
    ``warmup_steps`` onward at ``base_lr``. The same rates as PyTorch's
    ``LinearLR(start_factor=s, end_factor=1.0, total_iters=warmup_steps)``, except
    that ``s`` may be 0 here.

    >>> from asgrad.nn import SGD, Linear, LinearWarmup
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = LinearWarmup(opt, warmup_steps=2)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(opt.lr, 4))  # a compiled step would run here
    ...     sched.step()
    >>> rates
    [0.0, 0.5, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        start_factor: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if warmup_steps < 0:
            raise ArgumentError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if not 0.0 <= start_factor <= 1.0:
            raise ArgumentError(f"start_factor must be in [0, 1], got {start_factor}")
        self.warmup_steps, self.start_factor = int(warmup_steps), float(start_factor)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * _warmup_factor(epoch, self.warmup_steps, self.start_factor)


class WarmupCosine(LRScheduler):
    """Linear warmup over ``warmup_steps``, then cosine decay to ``eta_min`` at ``total_steps``.

    For ``t < warmup_steps`` the rate is [`LinearWarmup`][asgrad.nn.LinearWarmup]'s; then
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * (t - W) / (total_steps - W))) / 2``;
    after ``total_steps`` it stays at ``eta_min``.

    >>> from asgrad.nn import SGD, Linear, WarmupCosine
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = WarmupCosine(opt, warmup_steps=1, total_steps=3)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(opt.lr, 4))  # a compiled step would run here
    ...     sched.step()
    >>> rates
    [0.0, 1.0, 0.5, 0.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        total_steps: int,
        eta_min: float = 0.0,
        start_factor: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not 0 <= warmup_steps < total_steps:
            raise ArgumentError(
                f"need 0 <= warmup_steps < total_steps, got {warmup_steps} and {total_steps}"
            )
        if not 0.0 <= start_factor <= 1.0:
            raise ArgumentError(f"start_factor must be in [0, 1], got {start_factor}")
        self.warmup_steps, self.total_steps = int(warmup_steps), int(total_steps)
        self.eta_min, self.start_factor = float(eta_min), float(start_factor)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        if epoch < self.warmup_steps:
            return self.base_lr * _warmup_factor(epoch, self.warmup_steps, self.start_factor)
        if epoch >= self.total_steps:
            return self.eta_min
        progress = (epoch - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2
