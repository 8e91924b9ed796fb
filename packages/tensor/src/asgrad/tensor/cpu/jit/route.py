"""A measured choice between kernels of one op, per shape, once per process.

Which kernel is fastest for a convolution or a pooling depends on its shape, the
machine, its thread count and its load: a kernel over Numba's threads loses to the same
kernel on one thread where the machine's cores are busy with other work (a thread that
is not scheduled holds up the whole loop), and for pooling the numpy kernel sometimes
wins. No rule written down holds across machines, so a `Route` measures: the first
`TRIALS` calls at a key (the op, the shapes, the dtype and the attributes) run every
candidate, the first into ``out`` and returned, the others into a scratch array; each
candidate's best time (the first call of each, which may compile, not counted) decides
which one runs every later call at that key in this process.

The candidates of one route compute the same bits (`routed`: the compiled kernel on
Numba's threads or on one thread, each output element made by one thread in the same
order; the numpy kernel only where it is bit-identical to them, as max pooling's is),
so the choice, which depends on timing, never changes a result: a run is reproducible,
and a resumed run continues bit for bit.

``force`` (None, or a kernel's name, ``"numpy"`` included) skips the measurement:
tests pin a kernel with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

# Calls at a key that run every kernel; the first of them is a warm-up.
TRIALS = 3

Kernel = Callable[[np.ndarray | None], np.ndarray]


class Route:
    """Per key, which of several kernels runs (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.force: str | None = None
        self.chosen: dict[Hashable, str] = {}
        self._trials: dict[Hashable, list[list[float]]] = {}
        self._lock = threading.Lock()

    def run(
        self,
        key: Hashable,
        kernels: Sequence[tuple[str, Kernel]],
        out: np.ndarray | None,
        spare: Callable[[], np.ndarray],
    ) -> np.ndarray:
        """One call at ``key`` of the chosen kernel (by name), or of every kernel while
        measuring (the first, the reference, into ``out``; the others into ``spare()``)."""
        wanted = self.force if self.force is not None else self.chosen.get(key)
        if wanted is not None:
            for name, kernel in kernels:
                if name == wanted:
                    return kernel(out)
        times: list[float] = []
        result = out
        for k, (_, kernel) in enumerate(kernels):
            start = time.perf_counter()
            if k == 0:
                result = kernel(out)
            else:
                kernel(spare())
            times.append(time.perf_counter() - start)
        with self._lock:
            trials = self._trials.setdefault(key, [])
            trials.append(times)
            if len(trials) >= TRIALS:
                best = [min(t[k] for t in trials[1:]) for k in range(len(kernels))]
                self.chosen[key] = kernels[best.index(min(best))][0]
                del self._trials[key]
        assert result is not None
        return result

    def describe(self) -> dict[Hashable, str]:
        """The choices made so far, by key."""
        return dict(self.chosen)


def key_of(op: str, arrays: tuple[Any, ...], attrs: dict[str, Any]) -> Hashable:
    """A route key: the op, each array's shape and dtype, and the attributes."""
    shapes = tuple((tuple(a.shape), str(a.dtype)) for a in arrays)
    return (op, shapes, tuple(sorted((k, repr(v)) for k, v in attrs.items())))


def routed(
    route: Route,
    key: Hashable,
    reference: Kernel,
    compiled: Kernel,
    out: np.ndarray | None,
    spare: Callable[[], np.ndarray],
    *,
    same_bits: bool = False,
) -> np.ndarray:
    """``route``'s choice at ``key`` between a parallel compiled kernel on Numba's
    threads (``"parallel"``) and the same on this thread alone (``"serial"``), and the
    numpy kernel (``"numpy"``) too when ``same_bits`` (it computes the compiled
    kernel's bits); ``force`` may pick ``"numpy"`` either way."""

    def serial(into: np.ndarray | None) -> np.ndarray:
        from asgrad.tensor.cpu.jit._numba import one_thread  # imports Numba

        with one_thread():
            return compiled(into)

    kernels = [("parallel", compiled), ("serial", serial)]
    if same_bits or route.force == "numpy":
        kernels.append(("numpy", reference))
    return route.run(key, kernels, out, spare)
