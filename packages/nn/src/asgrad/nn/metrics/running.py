"""Streaming statistics: values accumulated over a training run, one update at a time."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import MetricError

__all__ = ["EMA", "RunningMean", "RunningMinMax", "RunningStd"]


def _values(x: float | ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64).ravel()


class RunningMean:
    """Mean of a stream of values; ``update`` takes a scalar or an array of values.

    ``update(value, weight=n)`` counts a batch mean as ``n`` observations.

    Example:
        >>> m = RunningMean()
        >>> m.update(1.0); m.update([2.0, 3.0]); m.value
        2.0
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every value seen."""
        self.total = 0.0
        self.count = 0.0

    def update(self, value: float | ArrayLike, weight: float = 1.0) -> None:
        """Add a scalar or every element of an array, each counted ``weight`` times."""
        v = _values(value)
        self.total += float(v.sum()) * weight
        self.count += v.size * weight

    @property
    def value(self) -> float:
        """The mean so far (NaN before the first update)."""
        return self.total / self.count if self.count else math.nan


class RunningStd:
    """Mean, variance and standard deviation of a stream (Welford/Chan, numerically
    stable; whole arrays are merged at once).

    Example:
        >>> s = RunningStd()
        >>> s.update([1.0, 2.0]); s.update([3.0, 4.0])
        >>> s.mean, s.var
        (2.5, 1.25)
    """

    def __init__(self, ddof: int = 0) -> None:
        self.ddof = ddof
        self.reset()

    def reset(self) -> None:
        """Forget every value seen."""
        self.count = 0
        self.mean = math.nan
        self._m2 = 0.0

    def update(self, value: float | ArrayLike) -> None:
        """Merge a scalar or every element of an array."""
        v = _values(value)
        if v.size == 0:
            return
        n_b, mean_b = v.size, float(v.mean())
        m2_b = float(((v - mean_b) ** 2).sum())
        if self.count == 0:
            self.count, self.mean, self._m2 = n_b, mean_b, m2_b
            return
        n = self.count + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self._m2 += m2_b + delta**2 * self.count * n_b / n
        self.count = n

    @property
    def var(self) -> float:
        """Variance with ``ddof`` (0: population); NaN with too few values."""
        return self._m2 / (self.count - self.ddof) if self.count > self.ddof else math.nan

    @property
    def std(self) -> float:
        """Standard deviation, the square root of `var`."""
        return math.sqrt(self.var)


class RunningMinMax:
    """Smallest and largest value of a stream.

    Example:
        >>> r = RunningMinMax()
        >>> r.update([3.0, -1.0]); r.update(7.0)
        >>> r.min, r.max
        (-1.0, 7.0)
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every value seen."""
        self.min = math.inf
        self.max = -math.inf

    def update(self, value: float | ArrayLike) -> None:
        """Widen the range to cover a scalar or every element of an array."""
        v = _values(value)
        if v.size:
            self.min = min(self.min, float(v.min()))
            self.max = max(self.max, float(v.max()))


class EMA:
    """Exponential moving average ``v = decay * v + (1 - decay) * x``.

    With ``bias_correction=True`` (the default) ``value`` divides by ``1 - decay**t`` as
    in Adam, so early values are not biased towards zero.

    Example:
        >>> e = EMA(decay=0.5)
        >>> e.update(4.0); e.value
        4.0
        >>> e.update(0.0); e.value  # (0.5*2 + 0) / (1 - 0.25)
        1.3333333333333333
    """

    def __init__(self, decay: float = 0.9, bias_correction: bool = True) -> None:
        if not 0.0 <= decay < 1.0:
            raise MetricError(f"EMA: decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.bias_correction = bias_correction
        self.reset()

    def reset(self) -> None:
        """Forget every value seen."""
        self._raw = 0.0
        self.steps = 0

    def update(self, value: float) -> None:
        """Fold one value into the average."""
        self._raw = self.decay * self._raw + (1.0 - self.decay) * float(value)
        self.steps += 1

    @property
    def value(self) -> float:
        """The (bias-corrected) average; NaN before the first update."""
        if self.steps == 0:
            return math.nan
        if self.bias_correction:
            return self._raw / (1.0 - self.decay**self.steps)
        return self._raw
