"""Host time of one compiled GPU training step: where asgrad's Python spends a ``launch``.

For each WORKLOADS.md workload, steps are launched back to back (the loss read every
``--sync-every`` steps, as a training loop would) and each ``launch`` call is timed
with ``time.perf_counter`` (``launch_us``) and by the calling thread's CPU time
(``time.thread_time``: ``launch_cpu_us``, robust against other processes on a shared
machine: the number to compare between trees). The CPU time inside wgpu-native's
functions called through wgpu-py's methods (creating the encoder and the compute
pass, finishing, submitting: where a driver such as lavapipe even runs the kernels)
is counted apart (``driver_cpu_us``; a launch through the C calls of
`asgrad.gpu.plan.capture.NativeSubmit` makes none, so there all of it is
``host_us``), so ``host_us`` is what the rest costs a step: the feeds,
the plan lookup, the captured replay (its raw calls to wgpu-native included; also
counted alone as ``replay_cpu_us``), the update bookkeeping and the queued readback.
``--profile N`` also prints the N functions with the most own time under cProfile
(which inflates Python calls)::

    WGPU_BACKEND_TYPE=Vulkan python benchmarks/gpu_host_time.py --workloads xor,mlp
    WGPU_BACKEND_TYPE=Vulkan python benchmarks/gpu_host_time.py --workloads xor --profile 25

Prints one JSON line per workload.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock


class _DriverClock:
    """Times every wgpu-native function wgpu-py calls (its ``libf`` table) while on."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _DriverClock:
        api = importlib.import_module("wgpu.backends.wgpu_native._api")
        self._libf = api.libf
        for name in dir(self._libf):
            if name.startswith("wgpu"):
                original = getattr(self._libf, name)
                self._saved[name] = original
                setattr(self._libf, name, self._timed(original))
        return self

    def _timed(self, function: Any) -> Any:
        def timed(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return function(*args)
            finally:
                self.seconds += time.thread_time() - start

        return timed

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(self._libf, name, original)


class _ReplayClock:
    """Times the captured replay (`asgrad.gpu.plan.capture.replay`, as the run path
    calls it) while on."""

    def __init__(self) -> None:
        self.seconds = 0.0
        backend = importlib.import_module("asgrad.gpu.backend")
        original = backend.replay

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start

        self._patch = mock.patch.object(backend, "replay", timed)

    def __enter__(self) -> _ReplayClock:
        self._patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.stop()


def measure(name: str, steps: int, sync_every: int, top: int) -> dict[str, Any]:
    """Per-step host microseconds of ``name``'s compiled GPU step."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    workloads = importlib.import_module("asgrad_workloads")  # the script's neighbour
    workload = workloads.build(name, "gpu")
    for _ in range(20):  # the plan, the pipelines, the readback pages
        workload.step()
    workload.sync()
    in_launch = cpu = driver = 0.0
    with _DriverClock() as clock, _ReplayClock() as replay:
        start = time.perf_counter()
        for i in range(steps):
            before, t, c = clock.seconds, time.perf_counter(), time.thread_time()
            workload.step()
            in_launch += time.perf_counter() - t
            cpu += time.thread_time() - c
            driver += clock.seconds - before  # the syncs' waits are not in a launch
            if (i + 1) % sync_every == 0:
                workload.sync()
        workload.sync()
        wall = time.perf_counter() - start
    if top:
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(steps):
            workload.step()
            if (i + 1) % sync_every == 0:
                workload.sync()
        workload.sync()
        profiler.disable()
        print(f"# {name}: cProfile, {steps} steps", flush=True)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(top)
    return {
        "bench": "gpu_host_time",
        "workload": name,
        "steps": steps,
        "dispatches": len(next(iter(workload.program.executable._plans.values())).commands),
        "launch_us": in_launch / steps * 1e6,
        "launch_cpu_us": cpu / steps * 1e6,
        "driver_cpu_us": driver / steps * 1e6,
        "host_us": (cpu - driver) / steps * 1e6,
        "replay_cpu_us": replay.seconds / steps * 1e6,
        "wall_us": wall / steps * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", default="xor,mlp")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sync-every", type=int, default=50)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    for name in args.workloads.split(","):
        row = measure(name, args.steps, args.sync_every, args.profile)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
