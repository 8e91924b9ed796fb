"""Time per node of a compiled CPU program (opt-in; the default path is unchanged).

`profile_program` generates a second function for the program's schedule that
calls a clock after each line, runs it ``repeat`` times on ``feeds`` (after one
warm-up run) and returns each node's median seconds and result bytes. Variables the
program updates are restored afterwards, so profiling a training step trains nothing.
Lines the code generator folded or dropped cost nothing and are absent.

>>> import numpy as np
>>> from asgrad.tensor import Graph, compile
>>> g = Graph()
>>> x = g.input("x", (64, 64))
>>> y = (x @ x).sum()
>>> prof = profile_program(compile([y]), {"x": np.ones((64, 64), np.float32)})
>>> y.node.name in prof.seconds
True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.tensor.cpu.codegen import generate_cpu_function
from asgrad.tensor.errors import BackendError
from asgrad.tensor.runtime.executor import Program

__all__ = ["NodeProfile", "profile_program"]


@dataclass
class NodeProfile:
    """Per node name: median seconds of its line, and the bytes of its result."""

    seconds: dict[str, float] = field(default_factory=dict)
    nbytes: dict[str, int] = field(default_factory=dict)
    total: float = 0.0


def profile_program(program: Program, feeds: Mapping[str, Any], repeat: int = 5) -> NodeProfile:
    """Time each node of the CPU ``program`` on ``feeds`` (see the module docstring)."""
    if program.backend != "cpu":
        raise BackendError(
            f"profile_program times CPU programs; this one runs on {program.backend!r}."
            " Compile it with backend='cpu' to profile it"
        )
    schedule = program.schedule
    prepared = program._prepare(feeds)
    types = schedule.infer_types({name: v.shape for name, v in prepared.items()})
    marks: list[tuple[int, float]] = []
    clock = time.perf_counter

    def record(node_id: int) -> None:
        marks.append((node_id, clock()))

    fn = generate_cpu_function(schedule, types, profile=record)
    saved = [(var, np.array(var.value)) for var, _ in schedule.updates]
    runs: dict[int, list[float]] = {}
    totals = []
    try:
        for k in range(repeat + 1):
            marks.clear()
            start = clock()
            fn(prepared)
            previous = start
            for node_id, t in marks:
                if k:  # the first run warms caches and allocates scratch buffers
                    runs.setdefault(node_id, []).append(t - previous)
                previous = t
            if k:
                totals.append(clock() - start)
    finally:
        for var, value in saved:
            var.value = value
    by_id = {n.id: n for n in schedule.nodes}
    result = NodeProfile(total=statistics.median(totals) if totals else 0.0)
    for node_id, times in runs.items():
        node = by_id[node_id]
        result.seconds[node.name] = statistics.median(times)
        type_ = types[node_id]
        result.nbytes[node.name] = int(np.prod(type_.shape)) * np.dtype(type_.dtype).itemsize
    return result
