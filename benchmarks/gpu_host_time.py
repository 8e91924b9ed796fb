"""Host time of one compiled GPU training step: where asgrad's Python spends a ``launch``.

For each WORKLOADS.md workload, steps are launched back to back (the loss read every
``--sync-every`` steps, as a training loop would) and each ``launch`` call is timed
with ``time.perf_counter``; the time inside the queue's ``submit`` (where a driver
such as lavapipe may run the kernels themselves) is timed apart, so ``host_us`` is
the Python and encoding cost of a step: the feeds, the plan lookup, the captured
replay, the update bookkeeping and the queued readback. ``--profile N`` also prints
the N functions with the most own time under cProfile (which inflates Python calls)::

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


class _TimedQueue:
    """A device queue whose ``submit`` calls are timed (everything else forwarded)."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self.seconds = 0.0

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self._queue.submit(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def measure(name: str, steps: int, sync_every: int, top: int) -> dict[str, Any]:
    """Per-step host microseconds of ``name``'s compiled GPU step."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    workloads = importlib.import_module("asgrad_workloads")  # the script's neighbour
    workload = workloads.build(name, "gpu")
    device = workload.program.executable.device
    for _ in range(20):  # the plan, the pipelines, the readback pages
        workload.step()
    workload.sync()
    queue = _TimedQueue(device.queue)
    device.queue = queue
    try:
        in_launch = 0.0
        start = time.perf_counter()
        for i in range(steps):
            t = time.perf_counter()
            workload.step()
            in_launch += time.perf_counter() - t
            if (i + 1) % sync_every == 0:
                workload.sync()
        workload.sync()
        wall = time.perf_counter() - start
        submitted = queue.seconds
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
    finally:
        device.queue = queue._queue
    return {
        "bench": "gpu_host_time",
        "workload": name,
        "steps": steps,
        "dispatches": len(next(iter(workload.program.executable._plans.values())).commands),
        "launch_us": in_launch / steps * 1e6,
        "submit_us": submitted / steps * 1e6,
        "host_us": (in_launch - submitted) / steps * 1e6,
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
