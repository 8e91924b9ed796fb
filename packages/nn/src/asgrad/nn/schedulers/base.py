"""The scheduler base class: a rate as a function of the number of ``step()`` calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError

__all__ = ["LRScheduler"]


class LRScheduler:
    """Base class: ``lr_at(t)`` gives the rate after ``t`` calls of
    [`step`][asgrad.nn.LRScheduler.step].

    ``base_lr`` is the optimizer's rate when the scheduler is made. ``state_dict()``
    is plain JSON (it goes to a checkpoint's ``meta.json``).

    >>> from asgrad.nn import SGD, Linear, LRScheduler
    >>> class Halving(LRScheduler):
    ...     def lr_at(self, epoch: int) -> float:
    ...         return self.base_lr / 2**epoch
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = Halving(opt)
    >>> sched.step()
    >>> opt.lr
    0.5
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
        """The rate set by the last [`step`][asgrad.nn.LRScheduler.step] (a one-element list, as
        PyTorch's)."""
        return [self._last_lr]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's settings and position, JSON-able."""
        return {
            key: value
            for key, value in vars(self).items()
            if key != "optimizer" and isinstance(value, int | float | str | bool)
        } | {"name": type(self).__name__}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore [`state_dict`][asgrad.nn.LRScheduler.state_dict]'s output and set the optimizer's
        rate to match."""
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
