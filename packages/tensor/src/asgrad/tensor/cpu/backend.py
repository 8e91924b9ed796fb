"""The CPU backend: a schedule compiles to one generated function per input shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.codegen import generate_cpu_function
from asgrad.tensor.cpu.jit.tier import compiled_now, step_counter, tiered
from asgrad.tensor.ir.cache import LRUCache
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.loops.body import set_compiler
from asgrad.tensor.runtime.backends import Executable
from asgrad.tensor.runtime.progress import reporting

# The in-process switch (set_enabled's value, a one-item list): part of each
# function's key, read per run as one index (the environment is read per function).
_setting = jit._override


class CPUExecutable:
    """A schedule on the CPU: one generated Python function per set of input shapes.

    The first run with a given set of input shapes infers every node's exact type
    and generates a function for them (`asgrad.tensor.cpu.codegen`): a line per
    node calling its numpy kernel, deleting each intermediate after its last use.
    Exact types let the generator do what the static graph cannot (shapes may
    change between runs): drop ops that are identities at these shapes, fold values
    that depend only on constants and shapes (a mean's gradient scale), call numpy
    directly for simple ops, run a batched matmul against a matrix as one matrix
    product, sum a batched product over its batch inside one product (a weight
    gradient), take the ops' float32 paths (erf, GELU, softmax, layer norm) and
    write results into dying inputs and scratch buffers.

    With the compiled path on (`asgrad.tensor.cpu.jit.mode`, read when a function
    is generated) the function calls Numba kernels and a small step is compiled
    whole (`asgrad.tensor.cpu.jit.step`): from the first call (``"on"``), or, by
    default (``"lazy"``), after the numpy function has run `TIER_UP_AT`
    steps (`asgrad.tensor.cpu.jit.tier`). A loop body (``loop_body``: run by the numpy
    ``scan`` kernel once per time step) follows the tier of the program running the
    loop: compiled while a tiered program's compiled form runs, numpy otherwise.
    Functions are kept per fed shapes, per `set_enabled` setting and, for a loop body,
    per tier, so switching takes effect for the next run.
    """

    # Generated functions kept, one per set of fed shapes, the most recently used.
    MAX_SPECIALIZATIONS = 16

    def __init__(self, schedule: Schedule, *, loop_body: bool = False) -> None:
        self.schedule = schedule
        self.loop_body = loop_body
        self._input_names = tuple(n.name for n in schedule.inputs)
        self._fns: LRUCache[tuple[Any, ...], Any] = LRUCache(self.MAX_SPECIALIZATIONS)
        self._last: tuple[tuple[Any, ...], Any] = ((), None)  # the last key and function

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        result: list[np.ndarray] = self.function(feeds)(feeds)
        return result

    def function(self, feeds: Mapping[str, np.ndarray]) -> Any:
        """The generated function for the shapes of ``feeds``: ``fn(feeds)`` runs once
        (a loop calling it step after step with unchanging shapes looks it up once)."""
        key = (
            *[feeds[name].shape for name in self._input_names],
            _setting[0],
            self.loop_body and compiled_now(),  # a body follows its program's tier
        )
        last_key, fn = self._last  # a training loop runs one key: no LRU bookkeeping
        if key != last_key:
            fn = self._fns.get(key)
            if fn is None:
                fn = self._specialize(key)
            self._last = (key, fn)
        return fn

    def scratch_bytes(self, feeds: Mapping[str, np.ndarray]) -> int:
        """The bytes of scratch buffers the function for the shapes of ``feeds`` holds
        between runs on this thread (0 before its first run): part of a run's memory
        that no run allocates again (see `asgrad.tensor.cpu.buffers`)."""
        scratch = getattr(self.function(feeds), "__globals__", {}).get("_scratch")
        held = getattr(scratch, "s", ())
        return sum(a.nbytes for a in held)

    def _specialize(self, key: tuple[Any, ...]) -> Any:
        shapes = key[:-2]
        with reporting(f"first run at shapes {', '.join(map(str, map(list, shapes)))}") as progress:
            progress.stage("CPU: inferring types")
            types = self.schedule.infer_types(dict(zip(self._input_names, shapes, strict=True)))
            mode = jit.mode()
            progress.stage("CPU: generating code for nodes", len(self.schedule.nodes))
            compiled = mode == "on" or (mode == "lazy" and key[-1])
            fn = generate_cpu_function(self.schedule, types, compiled=compiled)
        if mode == "lazy" and not self.loop_body:
            fn = tiered(
                fn,
                lambda: self._compiled(types, shapes),
                step_counter(self.schedule),
                jit.TIER_UP_AT,
            )
        return self._fns.put(key, fn)

    def _compiled(self, types: Any, shapes: tuple[Any, ...]) -> Any:
        """The compiled form of the function at ``types`` (a tiered function's second tier)."""
        label = f"compiled CPU tier at shapes {', '.join(map(str, map(list, shapes)))}"
        with reporting(label) as progress:
            progress.stage("CPU: generating code with Numba kernels", len(self.schedule.nodes))
            return generate_cpu_function(self.schedule, types, compiled=True)


class CPUBackend:
    """The numpy reference backend, built in as ``"cpu"``.

    See `asgrad.tensor.runtime.backends`.
    """

    name = "cpu"

    def available(self) -> bool:
        return True

    def compile(self, schedule: Schedule) -> Executable:
        return CPUExecutable(schedule)


# The numpy ``scan`` kernel runs a loop body as a CPU program (loops import no backend).
set_compiler(lambda schedule: CPUExecutable(schedule, loop_body=True))
