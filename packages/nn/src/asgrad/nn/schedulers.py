"""Learning-rate schedulers: they set ``optimizer.lr`` between steps, never recompiling.

The learning rate is a variable that the compiled training step reads, so a
scheduler only writes a new number into it. Every scheduler computes its rate in
closed form from the number of :meth:`LRScheduler.step` calls, as PyTorch's
``_get_closed_form_lr``: the first rate (``last_epoch == 0``) is set when the
scheduler is made, and each ``step()`` after an optimizer step moves to the next.

>>> from asgrad.nn import Linear, SGD
>>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=0.1)
>>> sched = StepLR(opt, step_size=2, gamma=0.5)
>>> rates = []
>>> for _ in range(5):
...     rates.append(opt.lr)  # a compiled step would run here
...     sched.step()
>>> rates
[0.1, 0.1, 0.05, 0.05, 0.025]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError

__all__ = [
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LinearWarmup",
    "StepLR",
    "WarmupCosine",
]


class LRScheduler:
    """Base class: ``lr_at(t)`` gives the rate after ``t`` calls of :meth:`step`.

    ``base_lr`` is the optimizer's rate when the scheduler is made. ``state_dict()``
    is plain JSON (it goes to a checkpoint's ``meta.json``).
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise ArgumentTypeError(
                f"{type(self).__name__} needs an asgrad Optimizer, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        self.base_lr = optimizer.lr
        self.last_epoch = last_epoch
        self._last_lr = optimizer.lr
        self.step()

    def lr_at(self, epoch: int) -> float:
        """The learning rate after ``epoch`` steps (``epoch >= 0``)."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance one step and write the new rate into the optimizer."""
        self.last_epoch += 1
        self._last_lr = float(self.lr_at(self.last_epoch))
        self.optimizer.lr = self._last_lr

    def get_last_lr(self) -> list[float]:
        """The rate set by the last :meth:`step` (a one-element list, as PyTorch's)."""
        return [self._last_lr]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's settings and position, JSON-able."""
        return {
            key: value
            for key, value in vars(self).items()
            if key != "optimizer" and isinstance(value, int | float | str | bool)
        } | {"name": type(self).__name__}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output and set the optimizer's rate to match."""
        name = state.get("name", type(self).__name__)
        if name != type(self).__name__:
            raise ArgumentError(f"state is of a {name}, not of a {type(self).__name__}")
        own = self.state_dict()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise ArgumentError(f"{type(self).__name__}.load_state_dict: unknown keys {unknown}")
        for key, value in state.items():
            if key != "name":
                setattr(self, key, value)
        self.optimizer.lr = self._last_lr

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self._last_lr})"


class StepLR(LRScheduler):
    """``base_lr * gamma ** (t // step_size)``, as ``torch.optim.lr_scheduler.StepLR``."""

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
    """``base_lr * gamma ** t``, as ``torch.optim.lr_scheduler.ExponentialLR``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``.

    The closed form of ``torch.optim.lr_scheduler.CosineAnnealingLR``; past
    ``T_max`` the cosine keeps going (the rate rises again), exactly as PyTorch's.
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

    For ``t < warmup_steps`` the rate is :class:`LinearWarmup`'s; then
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * (t - W) / (total_steps - W))) / 2``;
    after ``total_steps`` it stays at ``eta_min``.
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
