"""Capture and replay: a plan's dispatches recorded once, replayed at every run.

While a :class:`Capture` is active on a device, :meth:`Device.dispatch
<asgrad.gpu.device.Device.dispatch>` collects each dispatch (pipeline, bind group,
grid) instead of recording it, and new arrays come from the capture's pool (the
plan's). :func:`replay` records captured commands into the device's open compute pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from asgrad.gpu.buffers import ScopedPool
from asgrad.gpu.errors import GpuError

if TYPE_CHECKING:
    from asgrad.gpu.device import Device

__all__ = ["Capture", "Command", "capturing", "profile", "replay"]

Command = tuple[Any, Any, tuple[int, int, int], str]  # pipeline, bind group, grid, label


class Capture:
    """The commands collected so far, and the pool that new arrays come from.

    ``checked``: some command records faults in the device's check slots
    (:mod:`asgrad.gpu.checks`), so a replay arms the device's checks.
    """

    def __init__(self, scope: ScopedPool) -> None:
        self.scope = scope
        self.commands: list[Command] = []
        self.checked = False


@contextmanager
def capturing(device: Device, scope: ScopedPool) -> Iterator[Capture]:
    """Collect ``device``'s dispatches instead of recording them, allocating from ``scope``."""
    if device.capture is not None:
        raise GpuError("a capture is already in progress")
    capture = device.capture = Capture(scope)
    try:
        yield capture
    finally:
        device.capture = None


def replay(device: Device, commands: Sequence[Command]) -> None:
    """Record captured commands into the device's open compute pass.

    Submits come after 32, 64, 128... commands (up to ``device.chunk_dispatches``): the
    GPU starts on the first kernels while the host still encodes the rest, and a long
    plan costs only a few submits.
    """
    chunk = min(32, device.chunk_dispatches)
    cpass: Any = None
    last = None
    for pipeline, group, groups, _ in commands:
        if cpass is None:
            cpass = device.compute_pass()
            last = None
        if pipeline is not last:
            cpass.set_pipeline(pipeline)
            last = pipeline
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(*groups)
        if device.recorded() >= chunk:
            device.flush()
            cpass = None
            chunk = min(2 * chunk, device.chunk_dispatches)
    device.counter.dispatches += len(commands)


def profile(device: Device, commands: Sequence[Command]) -> list[tuple[str, float]]:
    """Run captured commands one at a time, waiting for each: (label, seconds).

    Each time includes one submit and one wait (measure an empty command list's cost
    with :meth:`Device.synchronize <asgrad.gpu.device.Device.synchronize>`); meant for
    finding the kernels that dominate.
    """
    device.synchronize()
    timings = []
    for command in commands:
        start = time.perf_counter()
        replay(device, [command])
        device.synchronize()
        timings.append((command[3], time.perf_counter() - start))
    return timings
