"""A measured choice between kernels of one op, per shape, kept on disk.

Which kernel is fastest for a convolution or a pooling depends on its shape, the
machine, its thread count and its load: a kernel over Numba's threads loses to the same
kernel on one thread where the machine's cores are busy with other work (a thread that
is not scheduled holds up the whole loop), and for pooling the numpy kernel sometimes
wins. No rule written down holds across machines, so a `Route` measures, at a key (the
op, the shapes, the dtype, the attributes and Numba's thread count):

* the first `TRIALS` calls run every candidate: the first kernel into ``out`` (its
  result is returned), the others into a scratch array. The first call is a warm-up
  (it may compile) and is not timed; each later one runs `ROUNDS` rounds of all the
  candidates back to back, in alternating order, so that a moment of load on the
  machine falls on every candidate alike;
* each candidate's *median* time over those rounds decides (a best time would reward
  a parallel kernel's one lucky moment on a loaded machine), and the first candidate
  of `PREFERRED` that the route has (Numba's threads, then one thread) keeps the key
  unless another's median is under ``1 - MARGIN`` of its own: a close race is not
  decided by noise, and the kernel that wins where the machine's cores are free (the
  threads) is kept until one thread is clearly faster.

A decision is written to ``routes.json`` in the cache folder (``ASGRAD_CACHE_DIR``,
beside Numba's compiled kernels), per machine (its architecture, CPU model and core
count) and key, and a later process reads it instead of measuring where it is the
preferred kernel (Numba's threads, `PREFERRED`'s first): once the threads have won, a
shape runs on them in every run on that machine. A decision for another kernel is
measured again, once, in each later process (and the new decision written): one
thread beats the threads where the machine's cores were busy when it was measured,
and a decision made in a moment of load must not keep a quiet machine's runs on one
thread (on the 2-core machine the file held "serial" for the cnn's pooling gradient,
whose kernel ran 2.5x as fast over both threads when the machine was quiet).
``ASGRAD_CPU_ROUTE`` overrides it: a kernel's name (``parallel``, ``serial`` or
``numpy``) runs that kernel everywhere, ``measure`` measures again (and writes the new
decision); unset, the file decides, else the measurement.

The candidates of one route compute the same bits (`routed`: the compiled kernel on
Numba's threads or on one thread, each output element made by one thread in the same
order; the numpy kernel only where it is bit-identical to them, as max pooling's is),
so the choice, which depends on timing, never changes a result: a run is reproducible,
and a resumed run continues bit for bit whether or not it finds the decision on disk.

``force`` (None, or a kernel's name, ``"numpy"`` included) skips the measurement and
the file: tests pin a kernel with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from asgrad.tensor.errors import ArgumentError

__all__ = ["ENV", "MARGIN", "PREFERRED", "ROUNDS", "TRIALS", "Route", "key_of", "routed"]

# Calls at a key that run every kernel; the first of them is a warm-up.
TRIALS = 3
# Rounds of every kernel in each timed call (alternating order).
ROUNDS = 3
# How much faster than the preferred kernel another must be to be chosen.
MARGIN = 0.1
# Which kernel keeps a key in a close race (the first of these a route has): Numba's
# threads, which won the cnn workload's convolutions by about 25% at load average 2-3
# on the 2-core machine (docs/performance.md, "Convolutions").
PREFERRED = ("parallel", "serial", "numpy")
ENV = "ASGRAD_CPU_ROUTE"
FILE = "routes.json"
_SETTINGS = ("parallel", "serial", "numpy", "measure")

Kernel = Callable[[np.ndarray | None], np.ndarray]


def setting() -> str | None:
    """``ASGRAD_CPU_ROUTE``: a kernel's name, ``"measure"``, or None (unset).

    Raises:
        ArgumentError: Any other value.
    """
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return None
    if value not in _SETTINGS:
        raise ArgumentError(
            f"{ENV}={value!r}: expected one of {', '.join(_SETTINGS)} (or unset: the"
            " decision on disk, else a measurement)"
        )
    return value


def machine() -> str:
    """This machine, as the routes file names it: architecture, CPU model, cores."""
    model = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{platform.machine()}|{model}|{os.cpu_count()}"


def store_path() -> Path:
    """The routes file: ``routes.json`` in the cache folder (``ASGRAD_CACHE_DIR``)."""
    from asgrad.tensor.cpu.jit import cache_dir

    return cache_dir().parent / FILE


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, update: Callable[[dict[str, Any]], None]) -> None:
    """Read the file again, ``update`` it and replace it whole (another process may have
    written decisions since: they are kept). A file that cannot be written is skipped:
    the next process measures again."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read(path)
        update(data)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".routes", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class Route:
    """Per key, which of several kernels runs (see the module docstring); ``persist``:
    whether decisions are read from and written to the routes file."""

    def __init__(self, name: str, *, persist: bool = True) -> None:
        self.name = name
        self.persist = persist
        self.force: str | None = None
        self.chosen: dict[Hashable, str] = {}
        self.measured: set[Hashable] = set()  # keys decided by a measurement here
        self._trials: dict[Hashable, list[list[list[float]]]] = {}
        self._stored: dict[str, dict[str, str]] = {}  # the file's decisions, by path
        self._lock = threading.Lock()

    def forced(self) -> str | None:
        """The kernel every call runs regardless of measurements: ``force``, else a
        kernel named by ``ASGRAD_CPU_ROUTE``; None."""
        if self.force is not None:
            return self.force
        value = setting()
        return None if value in (None, "measure") else value

    def _section(self) -> str:
        return f"{machine()}|{self.name}"

    def _from_disk(self, key: Hashable) -> str | None:
        """The routes file's decision at ``key`` where it is the preferred kernel
        (`PREFERRED`'s first); None where there is none, where it names another kernel
        (measured again, see the module docstring), or under ``ASGRAD_CPU_ROUTE=measure``."""
        if not self.persist or setting() == "measure":
            return None
        path = str(store_path())
        if path not in self._stored:
            section = _read(Path(path)).get(self._section(), {})
            self._stored[path] = section if isinstance(section, dict) else {}
        found = self._stored[path].get(repr(key))
        return found if found == PREFERRED[0] else None

    def _to_disk(self, key: Hashable, choice: str) -> None:
        if not self.persist:
            return
        path = store_path()
        section = self._section()

        def update(data: dict[str, Any]) -> None:
            entries = data.get(section)
            if not isinstance(entries, dict):
                entries = data[section] = {}
            entries[repr(key)] = choice

        _write(path, update)
        self._stored.setdefault(str(path), {})[repr(key)] = choice

    def stored(self, key: Hashable) -> str | None:
        """The decision at ``key`` in the routes file that a new process keeps: the
        preferred kernel's name, else None (none, another kernel's, to be measured again,
        or ``ASGRAD_CPU_ROUTE=measure``)."""
        return self._from_disk(key)

    def decided(self, key: Hashable, choice: str) -> None:
        """Record a decision made by measuring at ``key`` (here and in the routes file)."""
        with self._lock:
            self.chosen[key] = choice
            self.measured.add(key)
            self._to_disk(key, choice)

    def run(
        self,
        key: Hashable,
        kernels: Sequence[tuple[str, Kernel]],
        out: np.ndarray | None,
        spare: Callable[[], np.ndarray],
    ) -> np.ndarray:
        """One call at ``key`` of the chosen kernel (by name), or of every kernel while
        measuring (the first, the reference, into ``out``; the others into ``spare()``).

        Raises:
            ArgumentError: ``force`` or ``ASGRAD_CPU_ROUTE`` names no kernel here.
        """
        wanted = self.forced()
        if wanted is None:
            wanted = self.chosen.get(key)
        if wanted is None and key not in self._trials:
            wanted = self._from_disk(key)
            names = [name for name, _ in kernels]
            if wanted is not None and wanted in names:
                self.chosen[key] = wanted
            else:
                wanted = None
        if wanted is not None:
            for name, kernel in kernels:
                if name == wanted:
                    return kernel(out)
            raise ArgumentError(
                f"route {self.name!r}: no kernel {wanted!r} here (it has"
                f" {', '.join(name for name, _ in kernels)})"
            )
        return self._measure(key, kernels, out, spare)

    def _measure(
        self,
        key: Hashable,
        kernels: Sequence[tuple[str, Kernel]],
        out: np.ndarray | None,
        spare: Callable[[], np.ndarray],
    ) -> np.ndarray:
        first = key not in self._trials
        result = kernels[0][1](out)
        if first:  # the warm-up: every kernel once, untimed (it may compile)
            for _, kernel in kernels[1:]:
                kernel(spare())
        times: list[list[float]] = [[] for _ in kernels]
        if not first:
            order = list(range(len(kernels)))
            for r in range(ROUNDS):
                for k in order if r % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    kernels[k][1](spare())
                    times[k].append(time.perf_counter() - start)
        with self._lock:
            trials = self._trials.setdefault(key, [])
            trials.append(times)
            if len(trials) >= TRIALS:
                typical = {
                    name: _median([s for t in trials for s in t[k]])
                    for k, (name, _) in enumerate(kernels)
                }
                self.chosen[key] = choice = decide(typical)
                self.measured.add(key)
                del self._trials[key]
                self._to_disk(key, choice)
        return result

    def describe(self) -> dict[Hashable, str]:
        """The choices made so far, by key."""
        return dict(self.chosen)


def _median(samples: list[float]) -> float:
    return float(np.median(samples)) if samples else float("inf")


def decide(best: dict[str, float]) -> str:
    """The kernel to run, from each kernel's typical time: the fastest, unless the
    first of `PREFERRED` present is within `MARGIN` of it.

    >>> decide({"parallel": 1.05, "serial": 1.0})
    'parallel'
    >>> decide({"parallel": 2.0, "serial": 1.0})
    'serial'
    """
    fastest = min(best, key=lambda name: best[name])
    for name in PREFERRED:
        if name in best:
            return name if best[fastest] >= (1 - MARGIN) * best[name] else fastest
    return fastest


def key_of(op: str, arrays: tuple[Any, ...], attrs: dict[str, Any]) -> Hashable:
    """A route key: the op, each array's shape and dtype, and the attributes (made on
    every call, so cheaply: their ``repr`` only where a value cannot be hashed)."""
    shapes = tuple((a.shape, a.dtype) for a in arrays)
    items = tuple(sorted(attrs.items()))
    try:
        hash(items)
    except TypeError:
        items = tuple((k, repr(v)) for k, v in items)
    return (op, shapes, items)


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
    """``route``'s choice at ``key`` (and Numba's thread count) between a parallel
    compiled kernel on Numba's threads (``"parallel"``) and the same on this thread
    alone (``"serial"``), and the numpy kernel (``"numpy"``) too when ``same_bits`` (it
    computes the compiled kernel's bits); a forced route may pick ``"numpy"`` either
    way."""
    from asgrad.tensor.cpu.jit._numba import num_threads, on_one_thread  # imports Numba

    def serial(into: np.ndarray | None) -> np.ndarray:
        result: np.ndarray = on_one_thread(compiled, into)
        return result

    kernels = [("parallel", compiled), ("serial", serial)]
    if same_bits or route.forced() == "numpy":
        kernels.append(("numpy", reference))
    return route.run((key, ("threads", num_threads())), kernels, out, spare)
