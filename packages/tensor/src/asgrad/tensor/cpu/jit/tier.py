"""Tiered CPU functions: the numpy path at once, the compiled form after `TIER_UP_AT` steps.

With the compiled path in its default, tiered mode (`asgrad.tensor.cpu.jit.mode`
``"lazy"``), the CPU backend generates a schedule's numpy function and runs it at
once; the compiled form (`generate_cpu_function` with ``compiled=True``: Numba
kernels, the whole step) is built on the call that reaches `TIER_UP_AT` steps, which
waits for Numba once, and runs every call from then on. A program that finishes
sooner (the xor example trains in 46 steps) never imports Numba.

**When it switches, and why then.** Both paths agree within each op's tolerance,
but not bit for bit (a matrix product written as loops, sums in another order, a
float32 exponential by another polynomial), so a switch at a moment that depends on
timing ("when a background compile finishes") would make two runs of one script
differ. The switch is at a step count instead, the same in every run:

* a program that counts its own steps (it updates a 0-d variable to itself plus
  one: every optimizer's ``optimizer.step``, which ``Optimizer.state_dict`` saves) runs
  numpy while that variable's value, read before each call, is below `TIER_UP_AT`,
  and compiled from then on. A run resumed from a checkpoint restores the counter,
  so each step runs on the tier it ran on in the uninterrupted run: the resumed run
  continues bit for bit;
* any other program (an evaluation) counts its calls: the first `TIER_UP_AT` run
  numpy. Two runs of a script agree; an evaluation in a resumed process counts
  afresh, so its outputs may round as the numpy path's where the uninterrupted run's
  were compiled (no variable depends on them, unless the script feeds them back, a
  learning rate reduced on a plateau of the validation loss: ``ASGRAD_CPU_JIT=1`` or
  ``0`` then);
* a loop body (run by the numpy ``scan`` kernel once per time step) follows the
  program running the loop (`compiled_now`): it runs compiled exactly while that
  program's compiled form runs.

The compiled form is built on the main thread, not in a background thread: Numba's
compiler is mostly Python and holds the interpreter lock, and a thread compiling the
xor step while the numpy steps ran made each numpy step take 50 ms instead of
0.07 ms on the 2-core machine (the steps release the lock at every numpy call and
wait a switch interval to get it back).

``ASGRAD_CPU_JIT=1`` (``set_enabled(True)``) compiles from the first call, as
``ASGRAD_CPU_JIT=0`` never does: either way every step runs one path.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.ir.variables import Variable
from asgrad.tensor.runtime.progress import reporting

__all__ = ["compiled_now", "step_counter", "tiered"]

# Whether this thread is inside a tiered function's compiled form (loop bodies follow it).
_running = threading.local()


def compiled_now() -> bool:
    """Whether the calling thread runs inside a tiered function's compiled form: a loop
    body run by it (the numpy ``scan`` kernel) takes the same tier, so it switches when
    its program does, at the same step in every run and in a resumed one."""
    return bool(getattr(_running, "compiled", False))


def step_counter(schedule: Schedule) -> Variable | None:
    """The variable counting the program's steps, or None: a 0-d variable that the
    program updates to itself plus one (every optimizer's ``optimizer.step``), or to
    ``where(skip, itself, itself + 1)`` (a step with a ``GradScaler``, which counts only
    the steps it does not skip)."""
    for var, node in schedule.updates:
        if var.ndim == 0 and (_adds_one(var, node) or _adds_one_unless(var, node)):
            return var
    return None


def _adds_one_unless(var: Variable, node: Node) -> bool:
    """Whether ``node`` is ``where(c, var, var + 1)``."""
    if node.op != "where" or len(node.inputs) != 3:
        return False
    _, old, new = node.inputs
    return old.op == "parameter" and old.attrs["variable"] is var and _adds_one(var, new)


def _adds_one(var: Variable, node: Node) -> bool:
    """Whether ``node`` is ``var + 1`` (or ``1 + var``)."""
    if node.op != "add" or len(node.inputs) != 2:
        return False
    a, b = node.inputs
    return any(
        p.op == "parameter"
        and p.attrs["variable"] is var
        and c.op == "constant"
        and np.ndim(c.attrs["value"]) == 0
        and c.attrs["value"] == 1
        for p, c in ((a, b), (b, a))
    )


def tiered(numpy_fn: Any, build: Callable[[], Any], counter: Variable | None, at: int) -> Any:
    """A function running ``numpy_fn`` for the first ``at`` steps and ``build()``'s
    function from then on (see the module docstring; ``counter``: the program's step
    counter, else its calls are counted).

    The result has ``tier()`` (the tier of the last call: ``"numpy"``, ``"compiled"``,
    or ``"none"`` before the first), ``compiled()`` (the compiled form, built on
    first use), ``source`` (the source of the tier that last ran), ``tier_up_at``,
    and, from the compiled form once built, ``step_plan``, ``step_declined`` and
    ``whole_step_active()``. A compiled form that cannot be built (Numba fails to
    import) leaves the numpy function running, with a warning and the reason in
    ``tier_declined``.
    """
    built: list[Any] = [None]
    last = ["none"]
    ran = [False]  # whether the compiled form ran (Numba compiles on its first call)

    def compiled() -> Any:
        fn = built[0]
        if fn is None:
            try:
                fn = build()
            except Exception as exc:  # Numba missing or broken: numpy stays, and says so
                reason = f"{type(exc).__name__}: {exc}"
                marked.tier_declined = reason
                warnings.warn(
                    f"the compiled CPU tier could not be built ({reason}); this program"
                    " keeps running on the numpy path. Set ASGRAD_CPU_JIT=0 to not try",
                    RuntimeWarning,
                    stacklevel=4,
                )
                fn = numpy_fn
            built[0] = fn
            marked.step_plan = getattr(fn, "step_plan", None)
            marked.step_declined = getattr(fn, "step_declined", None)
        return fn

    def numpy_call(feeds: Any) -> Any:
        last[0] = "numpy"
        return numpy_fn(feeds)

    def compiled_call(feeds: Any) -> Any:
        fn = built[0] if built[0] is not None else compiled()
        if fn is numpy_fn:
            return numpy_call(feeds)
        if last[0] != "compiled":
            last[0] = "compiled"
            marked.source = fn.source
        outer = compiled_now()
        _running.compiled = True
        try:
            if ran[0]:
                return fn(feeds)
            ran[0] = True
            with reporting(f"tiering up after {at:,} steps") as progress:
                progress.stage("Numba: compiling the step's kernels (once; cached on disk)")
                return fn(feeds)
        finally:
            _running.compiled = outer

    calls = [0]
    impl: list[Callable[[Any], Any]] = []

    def by_calls(feeds: Any) -> Any:
        calls[0] += 1
        if calls[0] <= at:
            return numpy_call(feeds)
        impl[0] = compiled_call  # calls only grow: no more counting
        return compiled_call(feeds)

    def by_counter(feeds: Any) -> Any:
        assert counter is not None
        if counter.value < at:
            if last[0] == "compiled":
                marked.source = numpy_fn.source
            return numpy_call(feeds)
        return compiled_call(feeds)

    impl.append(by_calls if counter is None else by_counter)

    def run(feeds: Any) -> Any:
        return impl[0](feeds)

    def whole_step_active() -> bool:
        fn = built[0]
        if last[0] != "compiled" or fn is None:
            return False
        return bool(getattr(fn, "whole_step_active", lambda: False)())

    marked: Any = run
    marked.source = numpy_fn.source
    marked.tier = lambda: last[0]
    marked.compiled = compiled
    marked.tier_up_at = at
    marked.tier_declined = None
    marked.step_plan = None
    marked.step_declined = f"not compiled yet: the numpy tier runs the first {at:,} steps"
    marked.whole_step_active = whole_step_active
    return marked
