"""The CPU backend: a schedule compiles to one generated function per input shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.codegen import generate_cpu_function
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

    With the compiled path on (`asgrad.tensor.cpu.jit.enabled`, read when a
    function is generated) a small step is compiled whole with Numba
    (`asgrad.tensor.cpu.jit.step`). Functions are kept per fed shapes and per
    `set_enabled` setting, so switching it takes effect
    for the next run.
    """

    # Generated functions kept, one per set of fed shapes, the most recently used.
    MAX_SPECIALIZATIONS = 16

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
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
        key = (*[feeds[name].shape for name in self._input_names], _setting[0])
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
        shapes = key[:-1]
        with reporting(f"first run at shapes {', '.join(map(str, map(list, shapes)))}") as progress:
            progress.stage("CPU: inferring types")
            types = self.schedule.infer_types(dict(zip(self._input_names, shapes, strict=True)))
            progress.stage("CPU: generating code for nodes", len(self.schedule.nodes))
            fn = generate_cpu_function(self.schedule, types, compiled=jit.enabled())
            return self._fns.put(key, fn)


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
set_compiler(lambda schedule: CPUBackend().compile(schedule))
