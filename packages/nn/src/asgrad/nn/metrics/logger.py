"""``MetricLogger``: named scalars recorded per step, with summaries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from asgrad.nn.errors import UnknownMetricError

__all__ = ["MetricLogger"]


class MetricLogger:
    """Record named scalars per step and summarise them.

    Example:
        >>> log = MetricLogger()
        >>> log.log(0, loss=1.0, acc=0.5)
        >>> log.log(1, loss=0.5)
        >>> log.latest("loss"), log.summary()["loss"]["min"]
        (0.5, 0.5)
    """

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[int, float]]] = {}

    def log(self, step: int, **values: float) -> None:
        """Record each ``name=value`` at ``step``."""
        for name, value in values.items():
            v = float(value)
            self.history.setdefault(name, []).append((step, v))

    def values(self, name: str) -> list[float]:
        """All values logged under ``name``, in order."""
        return [v for _, v in self._series(name)]

    def steps(self, name: str) -> list[int]:
        """The steps at which ``name`` was logged, in order."""
        return [s for s, _ in self._series(name)]

    def latest(self, name: str) -> float:
        """The last value logged under ``name``."""
        return self._series(name)[-1][1]

    def _series(self, name: str) -> list[tuple[int, float]]:
        if name not in self.history:
            known = ", ".join(sorted(self.history)) or "none yet"
            raise UnknownMetricError(f"MetricLogger: no metric {name!r} (logged: {known})")
        return self.history[name]

    def summary(self) -> dict[str, dict[str, float]]:
        """Per name: ``last``, ``mean``, ``min``, ``max``, ``count`` (JSON-able)."""
        out: dict[str, dict[str, float]] = {}
        for name, series in self.history.items():
            v = np.array([x for _, x in series], dtype=np.float64)
            out[name] = {
                "last": float(v[-1]),
                "mean": float(v.mean()),
                "min": float(v.min()),
                "max": float(v.max()),
                "count": float(v.size),
            }
        return out

    def format(self, step: int | None = None) -> str:
        """One line with the latest value of every metric, e.g. for a progress bar."""
        parts = [f"{k}={s[-1][1]:.4g}" for k, s in sorted(self.history.items())]
        return (f"step {step}: " if step is not None else "") + " ".join(parts)

    def state_dict(self) -> dict[str, list[list[float]]]:
        """The whole history as JSON-able lists of ``[step, value]``."""
        return {k: [[s, v] for s, v in series] for k, series in self.history.items()}

    def load_state_dict(self, state: Mapping[str, Iterable[Iterable[float]]]) -> None:
        """Replace the history by what :meth:`state_dict` returned."""
        self.history = {k: [(int(s), float(v)) for s, v in series] for k, series in state.items()}
