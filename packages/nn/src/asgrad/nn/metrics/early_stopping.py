"""``EarlyStopping``: stop training once a validation metric stops improving."""

from __future__ import annotations

import math
from typing import Literal

from asgrad.nn.errors import MetricError

__all__ = ["EarlyStopping"]


class EarlyStopping:
    """Stop training once a metric has not improved for ``patience`` checks.

    An improvement is a value below ``best - min_delta`` (``mode="min"``, e.g. a loss)
    or above ``best + min_delta`` (``mode="max"``, e.g. accuracy). NaN never improves.

    Example:
        >>> stop = EarlyStopping(patience=2, mode="min")
        >>> [stop.step(v) for v in [1.0, 0.9, 0.95, 0.91]]
        [False, False, False, True]
        >>> stop.best, stop.best_step
        (0.9, 1)
    """

    def __init__(
        self,
        patience: int = 10,
        min_delta: float = 0.0,
        mode: Literal["min", "max"] = "min",
    ) -> None:
        if mode not in ("min", "max"):
            raise MetricError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}")
        if patience < 0 or min_delta < 0:
            raise MetricError("EarlyStopping: patience and min_delta must be >= 0")
        self.patience = patience
        self.min_delta = min_delta
        self.mode = mode
        self.best = math.inf if mode == "min" else -math.inf
        self.best_step = -1
        self.num_bad = 0
        self.steps = 0
        self.should_stop = False

    def is_improvement(self, value: float) -> bool:
        """Whether ``value`` beats the best so far by more than ``min_delta``."""
        if math.isnan(value):
            return False
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def step(self, value: float) -> bool:
        """Record one check of the metric; return True when training should stop."""
        value = float(value)
        if self.is_improvement(value):
            self.best, self.best_step, self.num_bad = value, self.steps, 0
        else:
            self.num_bad += 1
        self.steps += 1
        self.should_stop = self.num_bad >= self.patience
        return self.should_stop

    def state_dict(self) -> dict[str, float | int | bool]:
        """The counters and the best value, JSON-able."""
        return {
            "best": self.best,
            "best_step": self.best_step,
            "num_bad": self.num_bad,
            "steps": self.steps,
            "should_stop": self.should_stop,
        }

    def load_state_dict(self, state: dict[str, float | int | bool]) -> None:
        """Continue from what `state_dict` returned."""
        self.best = float(state["best"])
        self.best_step = int(state["best_step"])
        self.num_bad = int(state["num_bad"])
        self.steps = int(state["steps"])
        self.should_stop = bool(state["should_stop"])
