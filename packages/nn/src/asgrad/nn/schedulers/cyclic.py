"""``OneCycleLR`` and ``CosineAnnealingWarmRestarts``, as PyTorch's."""

from __future__ import annotations

import math

from asgrad.nn.optim.optimizer import Optimizer
from asgrad.nn.schedulers.base import LRScheduler
from asgrad.tensor.errors import ArgumentError

__all__ = ["CosineAnnealingWarmRestarts", "OneCycleLR"]


def _cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2018), as ``torch.optim.lr_scheduler.OneCycleLR``.

    The rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then anneals to
    ``max_lr / div_factor / final_div_factor`` (``three_phase``: back down to the start
    first, then to the minimum), by a cosine or linearly (``anneal_strategy``). Call
    [`step`][asgrad.nn.OneCycleLR.step] after every batch; stepping past ``total_steps`` is an
    error, as in PyTorch. The rates of the ``total_steps`` batches are PyTorch's; the one set by the
    last ``step()`` (used by no batch) stays at the final rate where PyTorch's goes past it.

    PyTorch also cycles the momentum (``cycle_momentum=True`` there); asgrad compiles
    an optimizer's momentum and betas into the training step, so only the rate
    cycles here, and ``cycle_momentum=True`` is refused rather than silently ignored.

    >>> from asgrad.nn import Linear, SGD
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=0.1)
    >>> sched = OneCycleLR(opt, max_lr=1.0, total_steps=5, pct_start=0.4)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(opt.lr, 6))
    ...     sched.step()  # the 6th step() would raise: total_steps is 5
    >>> rates
    [0.04, 1.0, 0.750001, 0.250003, 4e-06]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = False,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ArgumentError(
                    "OneCycleLR needs total_steps, or both epochs and steps_per_epoch"
                )
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ArgumentError(
                    f"epochs and steps_per_epoch must be > 0, got {epochs}, {steps_per_epoch}"
                )
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise ArgumentError(f"total_steps must be > 0, got {total_steps}")
        if not 0.0 <= pct_start <= 1.0:
            raise ArgumentError(f"pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ArgumentError(
                f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        if cycle_momentum:
            raise ArgumentError(
                "cycle_momentum=True is not supported: the momentum (betas) is compiled into"
                " the training step; pass cycle_momentum=False (only the rate cycles)"
            )
        if not max_lr > 0 or not div_factor > 0 or not final_div_factor > 0:
            raise ArgumentError("max_lr, div_factor and final_div_factor must be > 0")
        self.total_steps, self.pct_start = int(total_steps), float(pct_start)
        self.anneal_strategy, self.three_phase = anneal_strategy, bool(three_phase)
        self.max_lr = float(max_lr)
        self.initial_lr = self.max_lr / div_factor
        self.min_lr = self.initial_lr / final_div_factor
        super().__init__(optimizer, last_epoch)

    def _phases(self) -> list[tuple[float, float, float]]:
        """(end step, start rate, end rate) of each phase, as PyTorch's."""
        up = float(self.pct_start * self.total_steps) - 1
        last = float(self.total_steps - 1)
        if self.three_phase:
            down = float(2 * self.pct_start * self.total_steps) - 2
            return [
                (up, self.initial_lr, self.max_lr),
                (down, self.max_lr, self.initial_lr),
                (last, self.initial_lr, self.min_lr),
            ]
        return [(up, self.initial_lr, self.max_lr), (last, self.max_lr, self.min_lr)]

    def lr_at(self, epoch: int) -> float:
        if epoch > self.total_steps:
            raise ArgumentError(
                f"OneCycleLR: tried to step {epoch} times; total_steps is {self.total_steps}"
            )
        anneal = _cos if self.anneal_strategy == "cos" else _linear
        phases = self._phases()
        start_step = 0.0
        for i, (end_step, start_lr, end_lr) in enumerate(phases):
            if epoch <= end_step or i == len(phases) - 1:
                # min(., 1): after the last batch PyTorch extrapolates (a negative
                # rate when linear); that rate is never used, here it stays at the end.
                pct = min((epoch - start_step) / (end_step - start_step), 1.0)
                return anneal(start_lr, end_lr, pct)
            start_step = end_step
        raise AssertionError("unreachable: the last phase always returns")

    def step(self) -> None:
        """Advance one batch; an error past ``total_steps`` leaves the rate unchanged."""
        rate = self.lr_at(self.last_epoch + 1)
        self.last_epoch += 1
        self._last_lr = float(rate)
        self.optimizer.lr = self._last_lr


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with restarts (SGDR, Loshchilov & Hutter 2017), as
    ``torch.optim.lr_scheduler.CosineAnnealingWarmRestarts``.

    The rate is ``eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``:
    the first cycle lasts ``T_0`` steps, each next one ``T_mult`` times longer, and
    ``T_cur`` counts steps since the last restart. ``step(epoch)`` jumps to a
    (possibly fractional) epoch, as PyTorch's, for steps within an epoch.

    >>> from asgrad.nn import Linear, SGD
    >>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=1.0)
    >>> sched = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    >>> rates = []
    >>> for _ in range(7):
    ...     rates.append(round(opt.lr, 4))
    ...     sched.step()
    >>> rates
    [1.0, 0.5, 1.0, 0.8536, 0.5, 0.1464, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,  # PyTorch's name
        T_mult: int = 1,  # PyTorch's name
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:  # type: ignore[redundant-expr]  # callers' floats
            raise ArgumentError(f"T_0 must be a positive int, got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:  # type: ignore[redundant-expr]  # as above
            raise ArgumentError(f"T_mult must be an int >= 1, got {T_mult!r}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, float(eta_min)
        self.epoch = float(max(last_epoch, 0))
        super().__init__(optimizer, last_epoch)

    def _position(self, epoch: float) -> tuple[float, float]:
        """(T_cur, T_i) at ``epoch``: the cycles are T_0, T_0 T_mult, T_0 T_mult**2..."""
        if self.T_mult == 1:
            return epoch % self.T_0, float(self.T_0)
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        start = self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
        length = float(self.T_0 * self.T_mult**n)
        if epoch - start >= length:  # log rounded down across a restart
            return epoch - start - length, length * self.T_mult
        if epoch < start:  # log rounded up
            length /= self.T_mult
            return epoch - (start - length), length
        return epoch - start, length

    def lr_at(self, epoch: int | float) -> float:
        t_cur, t_i = self._position(float(epoch))
        return (
            self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
        )

    def step(self, epoch: float | None = None) -> None:
        """Advance one step, or to ``epoch`` (fractional epochs allowed)."""
        if epoch is None:
            epoch = self.last_epoch + 1
        elif epoch < 0:
            raise ArgumentError(f"epoch must be >= 0, got {epoch}")
        self.last_epoch = math.floor(epoch)
        self.epoch = float(epoch)
        self._last_lr = float(self.lr_at(epoch))
        self.optimizer.lr = self._last_lr
