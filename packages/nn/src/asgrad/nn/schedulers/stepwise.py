"""``MultiStepLR``, ``LambdaLR`` and ``ReduceLROnPlateau``, as PyTorch's."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.nn.schedulers.base import LRScheduler
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError

__all__ = ["LambdaLR", "MultiStepLR", "ReduceLROnPlateau"]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** k``, ``k`` the number of milestones ``<= t``, as
    ``torch.optim.lr_scheduler.MultiStepLR`` (a milestone given twice counts twice).

    >>> from asgrad.nn import Linear, SGD
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    >>> rates = []
    >>> for _ in range(6):
    ...     rates.append(opt.lr)
    ...     sched.step()
    >>> rates
    [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self._milestones = sorted(int(m) for m in milestones)
        if any(m < 0 for m in self._milestones):
            raise ArgumentError(f"milestones must be >= 0, got {self._milestones}")
        self.milestones = ",".join(str(m) for m in self._milestones)  # JSON-able state
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma ** bisect.bisect_right(self._milestones, epoch)


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(t)``, as ``torch.optim.lr_scheduler.LambdaLR``.

    The function is not part of [`state_dict`][asgrad.nn.LRScheduler.state_dict] (a checkpoint
    stores the position; make the scheduler with the same function before loading it).

    >>> from asgrad.nn import Linear, SGD
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=0.1)
    >>> sched = LambdaLR(opt, lambda t: 0.5**t)
    >>> sched.step(); sched.step()
    >>> opt.lr
    0.025
    """

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable[[int], float], last_epoch: int = -1
    ) -> None:
        if not callable(lr_lambda):
            raise ArgumentTypeError(
                f"lr_lambda must be a function of the step, got {type(lr_lambda).__name__}"
            )
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * float(self.lr_lambda(epoch))


class ReduceLROnPlateau:
    """Multiply the rate by ``factor`` when a metric stops improving, as
    ``torch.optim.lr_scheduler.ReduceLROnPlateau``.

    Call [`step`][asgrad.nn.ReduceLROnPlateau.step] with the metric after each epoch. A value is an
    improvement when it beats the best so far by ``threshold`` (``threshold_mode="rel"``: by that
    fraction of it; ``"abs"``: by that amount; ``mode="max"`` for a metric that should
    rise). After more than ``patience`` epochs without one, the rate becomes
    ``max(lr * factor, min_lr)`` (unless that changes it by ``eps`` or less), and
    ``cooldown`` epochs follow in which bad epochs are not counted.

    >>> from asgrad.nn import Linear, SGD
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = ReduceLROnPlateau(opt, patience=1)
    >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0]:
    ...     sched.step(loss)
    >>> opt.lr
    0.1
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise ArgumentTypeError(
                f"ReduceLROnPlateau needs an asgrad Optimizer, got {type(optimizer).__name__}"
            )
        if mode not in ("min", "max"):
            raise ArgumentError(f"mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ArgumentError(f"threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        if not 0.0 <= factor < 1.0:
            raise ArgumentError(f"factor must be in [0, 1) (it reduces the rate), got {factor}")
        if patience < 0 or cooldown < 0 or min_lr < 0:
            raise ArgumentError(
                f"patience, cooldown and min_lr must be >= 0, got {patience}, {cooldown}, {min_lr}"
            )
        self.optimizer = optimizer
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor, self.patience, self.threshold = float(factor), int(patience), threshold
        self.cooldown, self.min_lr, self.eps = int(cooldown), float(min_lr), float(eps)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = optimizer.lr

    def _is_better(self, value: float) -> bool:
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return value < self.best * (1.0 - self.threshold)
            return value < self.best - self.threshold
        if self.threshold_mode == "rel":
            return value > self.best * (1.0 + self.threshold)
        return value > self.best + self.threshold

    def step(self, metrics: float) -> None:
        """Record one epoch's metric (a float or a 0-d array) and reduce the rate if due."""
        try:
            current = float(metrics)
        except (TypeError, ValueError):
            raise ArgumentTypeError(
                f"ReduceLROnPlateau.step needs the metric as a number, got {metrics!r}"
            ) from None
        self.last_epoch += 1
        if self._is_better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            old = self.optimizer.lr
            new = max(old * self.factor, self.min_lr)
            if old - new > self.eps:
                self.optimizer.lr = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self.optimizer.lr

    def get_last_lr(self) -> list[float]:
        """The rate after the last [`step`][asgrad.nn.ReduceLROnPlateau.step] (a one-element list,
        as PyTorch's)."""
        return [self._last_lr]

    def state_dict(self) -> dict[str, Any]:
        """Settings, best value and counters, JSON-able."""
        return {k: v for k, v in vars(self).items() if isinstance(v, int | float | str | bool)} | {
            "name": "ReduceLROnPlateau"
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore [`state_dict`][asgrad.nn.ReduceLROnPlateau.state_dict]'s output and set the
        optimizer's rate to match."""
        if state.get("name", "ReduceLROnPlateau") != "ReduceLROnPlateau":
            raise ArgumentError(f"state is of a {state['name']}, not of a ReduceLROnPlateau")
        unknown = sorted(set(state) - set(self.state_dict()))
        if unknown:
            raise ArgumentError(f"ReduceLROnPlateau.load_state_dict: unknown keys {unknown}")
        for key, value in state.items():
            if key != "name":
                setattr(self, key, value)
        self.optimizer.lr = self._last_lr

    def __repr__(self) -> str:
        return f"ReduceLROnPlateau(best={self.best}, lr={self._last_lr})"
