"""A measured choice between two kernels of one op, per shape, once per process.

Which kernel is faster for a convolution depends on its shape, the machine and the
thread count: a direct kernel wins where channels are few and images small, BLAS
where the products are large. No rule written down holds across machines, so a
`Route` measures: the first `TRIALS` calls at a key (the op, the shapes, the
dtype and the attributes) run both kernels, the reference's result returned and
the other written into a scratch array; each kernel's best time (the first call of
each, which may compile, not counted) decides which one runs every later call at
that key in this process. Both kernels agree within the op's tolerance, so the
choice moves results by rounding only.

``force`` (None, or the name of a kernel) skips the measurement: tests pin a
kernel with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

# Calls at a key that run both kernels; the first of them is a warm-up.
TRIALS = 3

Kernel = Callable[[np.ndarray | None], np.ndarray]


class Route:
    """Per key, which of a reference kernel and a candidate runs (see the module
    docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.force: str | None = None
        self.chosen: dict[Hashable, str] = {}
        self._trials: dict[Hashable, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def run(
        self,
        key: Hashable,
        reference: Kernel,
        candidate: Kernel,
        out: np.ndarray | None,
        spare: Callable[[], np.ndarray],
    ) -> np.ndarray:
        """One call at ``key``: ``reference(out)`` or ``candidate(out)`` as chosen, or
        both while measuring (``candidate`` into ``spare()``)."""
        if self.force is not None:
            return candidate(out) if self.force == "candidate" else reference(out)
        chosen = self.chosen.get(key)
        if chosen == "candidate":
            return candidate(out)
        if chosen == "reference":
            return reference(out)
        start = time.perf_counter()
        candidate(spare())
        middle = time.perf_counter()
        result = reference(out)
        end = time.perf_counter()
        with self._lock:
            trials = self._trials.setdefault(key, [])
            trials.append((middle - start, end - middle))
            if len(trials) >= TRIALS:
                timed = trials[1:]
                best_candidate = min(t[0] for t in timed)
                best_reference = min(t[1] for t in timed)
                self.chosen[key] = "candidate" if best_candidate < best_reference else "reference"
                del self._trials[key]
        return result

    def describe(self) -> dict[Hashable, str]:
        """The choices made so far, by key."""
        return dict(self.chosen)


def key_of(op: str, arrays: tuple[Any, ...], attrs: dict[str, Any]) -> Hashable:
    """A route key: the op, each array's shape and dtype, and the attributes."""
    shapes = tuple((tuple(a.shape), str(a.dtype)) for a in arrays)
    return (op, shapes, tuple(sorted((k, repr(v)) for k, v in attrs.items())))
