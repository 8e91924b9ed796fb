"""Threads of the compiled elementwise loops and row kernels: serial or threaded, per kernel.

Each rendered elementwise loop (`asgrad.tensor.cpu.jit.kernels.rendered_kernel`) and
row kernel (`asgrad.tensor.cpu.jit.render_rows.rows_kernel`) has a parallel form
beside its serial one (``numba.prange``, ``parallel=True``): the elementwise loop over
chunks of `CHUNK` elements, the row kernels over rows (``_rows``) or over the leading
axis (``_slabs``), each row reduced by one thread exactly as the serial kernel reduces
it. Both forms compute every element the same way (a row's sum is always taken by one
thread, in the serial kernel's order, never split between threads), so their results
are bit-identical, and which form runs never changes a result. Adam's fused step
(`asgrad.tensor.cpu.jit.kernels_optim.adam_step`) has the same chunked parallel form
and the same choice.

A kernel whose result has fewer than `PARALLEL_MIN` elements runs serially. Above it,
which form runs is a measured choice per kernel (`Site`: the generated module, the
result's size and the thread count), as the convolutions' routes are
(`asgrad.tensor.cpu.jit.route`): whether threads pay depends on the kernel, its size,
what runs around it (BLAS's threads, the convolutions' own parallel loops) and the
machine's load, and no fixed threshold held on the 2-core machine (docs/performance.md,
"Threads"). The choice:

* the calls during the first step (`new_step`, which each compiled line function
  calls when it starts) run serially, so the first result waits for no compile of a
  parallel form;
* from a later step on, `PROBES` serial calls (one) are timed: a kernel whose best
  time is under `SERIAL_FLOOR` (50 us) stays serial, and its parallel form is never
  compiled;
* else the next call runs the parallel form untimed (a warm-up: it compiles, about a
  second on a cold cache), then `SAMPLES` calls of each form alternate
  (P S S P P S S P), each timed as it runs in the step: no extra work, every call
  computes the step's result; a form `CLEAR` (2) times faster than the other in each
  of the first `EARLY` (2) calls of each decides there (P S S P);
* their median times decide, a close race (within ``route.MARGIN``) keeping the
  parallel form (`asgrad.tensor.cpu.jit.route.decide`), and the decision is written
  to the cache folder's ``routes.json`` (section ``threads``, keyed by the machine,
  the kernel's module, the size and the thread count), which later processes on the
  machine read instead of measuring where the parallel form won (a serial decision is
  measured again in each later process, as the route's are: `asgrad.tensor.cpu.jit.route`).

Settings, first match wins:

* `set_threads` ``(n)`` or ``ASGRAD_CPU_THREADS=n``: ``n`` = 1 runs every kernel
  serially; ``n`` >= 2 runs every kernel of at least `PARALLEL_MIN` elements over
  ``n`` threads, unmeasured;
* ``ASGRAD_CPU_ROUTE=serial`` or ``parallel``: that form everywhere (Numba's thread
  count); ``measure``: measure again, ignoring the file; ``numpy`` does not apply here;
* else Numba's thread count (``numba.get_num_threads()``: ``NUMBA_NUM_THREADS``, by
  default the cores): 1 runs serially, more are measured as above.

The settings are read when a step begins (`new_step`) and when `set_threads` is
called, not at every kernel's call (reading the environment costs microseconds).

The matrix products keep BLAS's own threads. They run between the kernels, but
OpenBLAS's idle threads poll for about 0.1 s after a product unless told otherwise, on
the cores a parallel kernel needs: `asgrad.tensor._openblas` shortens that where the
kernels may thread. `report` lists the choices made and the times behind them. Nothing
here imports Numba before a kernel asks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit import route
from asgrad.tensor.errors import ArgumentError

__all__ = [
    "CHUNK",
    "CLEAR",
    "EARLY",
    "ENV",
    "PARALLEL",
    "PARALLEL_MIN",
    "PROBE",
    "PROBES",
    "ROUTE",
    "SAMPLES",
    "SERIAL",
    "SERIAL_FLOOR",
    "TIMED",
    "Site",
    "may_thread",
    "new_step",
    "report",
    "set_threads",
    "threads",
]

# Elements of a result from which a kernel may run over threads (PyTorch's grain size
# for its elementwise and norm kernels is 32768).
PARALLEL_MIN = 32768
# Elements one thread of the parallel elementwise loop takes at a time.
CHUNK = 16384
ENV = "ASGRAD_CPU_THREADS"
# Timed serial calls that first probe a kernel's time (its best under `SERIAL_FLOOR`
# seconds: it stays serial, its parallel form never compiled), then the timed calls of
# each form before its choice is made. One probe: a kernel called once a step compiles
# its parallel form (the warm-up) in its third step, inside `benchmarks/bench_worker.py`'s
# three untimed steps (with two probes it was the fourth, the first timed one, about a
# second on a cold cache). A probe slowed by chance only makes a quick kernel measured.
PROBES = 1
SAMPLES = 4
# A form faster than the other by at least `CLEAR` times in each of the first `EARLY`
# samples of each decides there (P S S P): the other form's slow calls stop sooner, and
# the choice is made inside fewer of the first steps. A closer race takes all `SAMPLES`.
EARLY = 2
CLEAR = 2.0
# Waking a second thread and waiting for the slower one costs on the order of 10 us, so
# a kernel this quick on one thread cannot gain enough to be measured reliably, and
# compiling its parallel form (about a second) would not pay.
SERIAL_FLOOR = 50e-6
# What `Site.form` returns: the serial or parallel form, plus TIMED when the caller is to
# time the call and report it (`Site.timed`), plus PROBE for a serial probe.
SERIAL, PARALLEL, TIMED, PROBE = 0, 1, 2, 4
# Numba's thread count from which an unset choice is measured (below it: serial). At 2
# threads the measurement compiles each kernel's parallel form and times it inside the
# first steps: a cold `benchmarks/run.py --threads 2` ran the mlp at 198 steps/s against
# 1,985 serial and the transformer at 14.2 against 26.8 (2026-12-02), which a run of
# hundreds of steps never wins back.
MEASURE_MIN_THREADS = 4

# The decisions, kept in routes.json (section "threads"), and the forced settings.
ROUTE = route.Route("threads")

_override: list[int | None] = [None]
# Numba, once imported here: every large kernel call asks for it, and setting up its
# cache again each time took 19 us a call.
_imported: list[Any] = []
# Steps begun (`new_step`): a kernel starts measuring in a later step than its first.
_steps = [0]


def _numba() -> Any:
    """Numba, imported after its cache is set up."""
    if not _imported:
        from asgrad.tensor.cpu.jit import prepare_numba

        prepare_numba()
        import numba

        _imported.append(numba)
    return _imported[0]


def _count(value: object, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{source}: the kernel threads must be an integer >= 1, got {value!r}")
    most = int(_numba().config.NUMBA_NUM_THREADS)
    if value > most:
        raise ArgumentError(
            f"{source}: {value} kernel threads, but Numba started {most}"
            " (set NUMBA_NUM_THREADS before Numba is imported to allow more)"
        )
    return value


def new_step() -> None:
    """Count a step begun (each compiled line function calls it first): a kernel's
    calls in the step of its first call all run serially."""
    _steps[0] += 1
    _parsed[0] = None  # the settings are read again


def set_threads(n: int | None) -> None:
    """Run the compiled elementwise and row kernels over ``n`` threads, unmeasured (1:
    serial everywhere); ``None`` goes back to the default (`threads`, measured).

    Raises:
        ArgumentError: ``n`` is not an integer >= 1, or is more than the
            ``NUMBA_NUM_THREADS`` Numba started with.

    >>> from asgrad.tensor.cpu.jit.threads import set_threads, threads
    >>> set_threads(1)
    >>> threads()
    1
    >>> set_threads(None)
    """
    _override[0] = None if n is None else _count(n, "set_threads")
    _parsed[0] = None


def _setting() -> tuple[int, bool, str | None]:
    """The kernel threads (`threads`), whether that count was set (`set_threads`,
    ``ASGRAD_CPU_THREADS``), and the form ``ASGRAD_CPU_ROUTE`` forces (``"serial"``,
    ``"parallel"``) or None: read when a step begins (`new_step`) or the count is set,
    not at every large kernel's call (reading the environment took microseconds)."""
    parsed = _parsed[0]
    if parsed is None:
        fixed = _fixed()
        wanted = ROUTE.forced() if fixed is None else None
        n = fixed if fixed is not None else int(_numba().get_num_threads())
        parsed = (n, fixed is not None, wanted if wanted in ("serial", "parallel") else None)
        _parsed[0] = parsed
    return parsed


# `_setting`'s answer, None until read again.
_parsed: list[tuple[int, bool, str | None] | None] = [None]


def _fixed() -> int | None:
    """The thread count set by `set_threads` or ``ASGRAD_CPU_THREADS``, else None."""
    if _override[0] is not None:
        return _override[0]
    env = os.environ.get(ENV, "").strip()
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        value = -1
    return _count(value if value >= 1 else env, ENV)


def threads() -> int:
    """The kernel threads a parallel form runs over: `set_threads`'s, else
    ``ASGRAD_CPU_THREADS``, else ``numba.get_num_threads()`` (imports Numba). Whether a
    kernel takes its parallel form is `Site.form`'s choice.

    Raises:
        ArgumentError: ``ASGRAD_CPU_THREADS`` is not an integer >= 1 within Numba's
            ``NUMBA_NUM_THREADS``.

    >>> from asgrad.tensor.cpu.jit.threads import threads
    >>> threads() >= 1
    True
    """
    n = _fixed()
    return n if n is not None else int(_numba().get_num_threads())


def may_thread(size: int) -> bool:
    """Whether a kernel with a result of ``size`` elements may run its parallel form at
    the settings now (at least `PARALLEL_MIN` elements, two threads or more, and no
    ``ASGRAD_CPU_ROUTE=serial``); whether it does is `Site.form`'s choice.

    >>> from asgrad.tensor.cpu.jit.threads import may_thread
    >>> may_thread(10)
    False
    """
    if size < PARALLEL_MIN:
        return False
    if _fixed() is None and ROUTE.forced() == "serial":
        return False
    return threads() >= 2


def _enough(serial: list[float], parallel: list[float]) -> bool:
    """Whether a trial's samples decide: `SAMPLES` of each form, or `EARLY` of each with
    one form `CLEAR` times faster than the other in every one of them.

    >>> _enough([1.0, 1.1], [0.2, 0.3])
    True
    >>> _enough([1.0, 0.4], [0.2, 0.3])
    False
    """
    if len(serial) >= SAMPLES and len(parallel) >= SAMPLES:
        return True
    if len(serial) < EARLY or len(parallel) < EARLY:
        return False
    return CLEAR * max(parallel) <= min(serial) or CLEAR * max(serial) <= min(parallel)


class _Trial:
    """A key's measurement: the step of its first call, its calls since, the serial
    probes' times and the alternating calls' (serial, parallel)."""

    __slots__ = ("calls", "probes", "step", "times")

    def __init__(self, step: int) -> None:
        self.step = step
        self.calls = 0
        self.probes: list[float] = []
        self.times: tuple[list[float], list[float]] = ([], [])


class Site:
    """The serial-or-parallel choice of one generated kernel module (``name``: the
    module's, a hash of its source), per result size and thread count (see the module
    docstring). ``force``: ``"serial"`` or ``"parallel"`` (at Numba's thread count as
    it is set, even one) for every call, whatever its size (tests,
    ``benchmarks/cpu_threads.py``), else None."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.force: str | None = None
        self._trials: dict[Hashable, _Trial] = {}
        self._lock = threading.Lock()
        # Per key decided by a measurement here: (serial, parallel) median seconds
        # (the parallel one None where the probes kept it serial), for `report`.
        self.measured: dict[Hashable, tuple[float, float | None]] = {}
        _SITES.append(self)

    def key(self, size: int, n: int) -> Hashable:
        """The routes file's key of this kernel at ``size`` elements over ``n`` threads."""
        return (self.name, size, n)

    def form(self, size: int) -> int:
        """The form a call with a result of ``size`` elements runs: `SERIAL` or
        `PARALLEL`, plus `TIMED` when the caller is to time it (`timed`). Where a
        thread count was set (`set_threads`, ``ASGRAD_CPU_THREADS``), Numba's thread
        count in the calling thread is set to it.

        Raises:
            ArgumentError: A bad ``ASGRAD_CPU_THREADS`` or ``ASGRAD_CPU_ROUTE``.
        """
        if self.force is not None:
            return PARALLEL if self.force == "parallel" else SERIAL
        if size < PARALLEL_MIN:
            return SERIAL
        n, fixed, forced = _setting()
        if n < 2 or forced == "serial":
            return SERIAL
        if fixed:
            numba = _numba()
            if numba.get_num_threads() != n:
                numba.set_num_threads(n)
            return PARALLEL
        if forced == "parallel":
            return PARALLEL
        if n < MEASURE_MIN_THREADS:
            return SERIAL
        key = (self.name, size, n)
        chosen = ROUTE.chosen.get(key)
        if chosen is None:
            return self._measuring(key)
        return PARALLEL if chosen == "parallel" else SERIAL

    def _measuring(self, key: Hashable) -> int:
        trial = self._trials.get(key)
        if trial is None:
            if ROUTE.stored(key) == "parallel":
                ROUTE.chosen[key] = "parallel"
                return PARALLEL
            self._trials[key] = _Trial(_steps[0])
            return SERIAL
        if trial.step == _steps[0]:
            return SERIAL  # the first step: serial, as before any measurement
        trial.calls += 1
        calls = trial.calls
        if calls <= PROBES:
            return PROBE + TIMED + SERIAL
        if calls == PROBES + 1:
            if min(trial.probes, default=0.0) < SERIAL_FLOOR:  # too quick for threads to pay
                with self._lock:
                    self._trials.pop(key, None)
                    self.measured[key] = (min(trial.probes, default=0.0), None)
                ROUTE.decided(key, "serial")
                return SERIAL
            return PARALLEL  # the warm-up: it may compile
        if calls > PROBES + 1 + 2 * SAMPLES:
            return SERIAL  # another thread is finishing the measurement
        return TIMED + (PARALLEL if (calls - PROBES - 2) % 4 in (0, 3) else SERIAL)

    def timed(self, size: int, form: int, seconds: float) -> None:
        """Report a call's time (``form`` as `form` returned it); the last sample decides."""
        key = (self.name, size, _setting()[0])
        with self._lock:
            trial = self._trials.get(key)
            if trial is None:
                return
            if form & PROBE:
                trial.probes.append(seconds)
                return
            trial.times[form & PARALLEL].append(seconds)
            if not _enough(*trial.times):
                return
            del self._trials[key]
        serial, parallel = (float(np.median(t)) for t in trial.times)
        self.measured[key] = (serial, parallel)
        ROUTE.decided(key, route.decide({"parallel": parallel, "serial": serial}))


# Every `Site` made in this process (one per kernel module), for `report`.
_SITES: list[Site] = []


def report() -> list[dict[str, Any]]:
    """What each kernel of this process chose, per size and thread count: a row per
    key with ``kernel`` (the module), ``size``, ``threads``, ``form`` (``"serial"``,
    ``"parallel"``, or ``"measuring"`` with ``calls`` so far), ``source``
    (``"measured"`` or ``"routes.json"``) and, where measured here,
    ``serial_ms`` and ``parallel_ms`` (the medians that decided; ``parallel_ms`` None
    where the serial probes were under `SERIAL_FLOOR`). Keys decided unmeasured
    (`set_threads`, ``ASGRAD_CPU_ROUTE``, below `PARALLEL_MIN`) have no row.

    >>> from asgrad.tensor.cpu.jit.threads import report
    >>> isinstance(report(), list)
    True
    """
    rows: list[dict[str, Any]] = []
    named: set[str] = set()  # a module made again (a test) has one Site per making
    for site in list(_SITES):
        if site.name in named:
            continue
        named.add(site.name)
        same = [s for s in _SITES if s.name == site.name]
        for key, choice in list(ROUTE.chosen.items()):
            if not (isinstance(key, tuple) and key[:1] == (site.name,)):
                continue
            row: dict[str, Any] = {
                "kernel": site.name,
                "size": key[1],
                "threads": key[2],
                "form": choice,
                "source": "measured" if key in ROUTE.measured else "routes.json",
            }
            times = next((s.measured[key] for s in same if key in s.measured), None)
            if times is not None:
                row["serial_ms"] = times[0] * 1e3
                row["parallel_ms"] = None if times[1] is None else times[1] * 1e3
            rows.append(row)
        for key, trial in [kt for s in same for kt in list(s._trials.items())]:
            assert isinstance(key, tuple)
            rows.append(
                {
                    "kernel": site.name,
                    "size": key[1],
                    "threads": key[2],
                    "form": "measuring",
                    "source": "measured",
                    "calls": trial.calls,
                }
            )
    return rows
