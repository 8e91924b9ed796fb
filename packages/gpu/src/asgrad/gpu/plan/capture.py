"""Capture and replay: a plan's dispatches recorded once, replayed at every run.

While a `Capture` is active on a device, [`Device.dispatch`][asgrad.gpu.Device.dispatch] collects
each dispatch (pipeline, bind group, grid) instead of recording it, and new arrays come from the
capture's pool (the plan's). `replay` records captured commands into the device's open compute pass.

Replaying is a tight loop: the first replay of a command list extracts each
command's raw wgpu-native handles once (`Commands`), and every replay calls
wgpu-native's C functions through wgpu-py's cffi library directly, three calls per
dispatch at most, skipping a ``set_pipeline`` or ``set_bind_group`` that repeats the
previous one. A launch (`asgrad.gpu.backend.launch_plan`) records its whole step so
(`NativeSubmit`): the command encoder, the compute pass, the commands, the copies of
its outputs into the readback page, finish and submit, each handle released at once,
with none of the objects and descriptors wgpu-py's methods make per call. Where
wgpu-py's internals are not as expected (another wgpu-py, another backend) or
``ASGRAD_GPU_FAST_REPLAY=0`` is set, both go through wgpu-py's public methods instead,
recording the same commands.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from asgrad.gpu.device.buffers import ScopedPool
from asgrad.gpu.errors import GpuError

if TYPE_CHECKING:
    from asgrad.gpu.device import Device

__all__ = [
    "Capture",
    "Command",
    "Commands",
    "NativeSubmit",
    "capturing",
    "native_calls",
    "native_submit",
    "profile",
    "replay",
]

Command = tuple[Any, Any, tuple[int, int, int], str]  # pipeline, bind group, grid, label
RawCommand = tuple[Any, Any, int, int, int]  # raw pipeline, raw bind group, grid


class Commands(list[Command]):
    """A captured command list; ``raw`` holds its raw handles once a replay made them
    (``False`` when they could not be had: that list replays through the public API)."""

    raw: list[RawCommand] | bool | None = None


def native_calls() -> tuple[Any, Any, Any, Any] | None:
    """wgpu-native's ``SetPipeline``, ``SetBindGroup``, ``DispatchWorkgroups`` and
    ``NULL`` from wgpu-py's cffi library, or ``None`` (not available, or turned off
    with ``ASGRAD_GPU_FAST_REPLAY=0``)."""
    if os.environ.get("ASGRAD_GPU_FAST_REPLAY", "1").strip() in {"0", "false", "no", "off"}:
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        lib, ffi = _api.lib, _api.ffi
        return (
            lib.wgpuComputePassEncoderSetPipeline,
            lib.wgpuComputePassEncoderSetBindGroup,
            lib.wgpuComputePassEncoderDispatchWorkgroups,
            ffi.NULL,
        )
    except (ImportError, AttributeError):
        return None


_NATIVE = native_calls()


class NativeSubmit:
    """One launch recorded and submitted through wgpu-native's C functions: a command
    encoder, a compute pass of captured commands (`replay`'s raw handles), buffer
    copies, then finish and submit, each handle released at once. wgpu-py's methods
    make an object, a descriptor and a release per call for the same."""

    def __init__(self, lib: Any, ffi: Any) -> None:
        self.create = lib.wgpuDeviceCreateCommandEncoder
        self.begin = lib.wgpuCommandEncoderBeginComputePass
        self.end = lib.wgpuComputePassEncoderEnd
        self.release_pass = lib.wgpuComputePassEncoderRelease
        self.copy = lib.wgpuCommandEncoderCopyBufferToBuffer
        self.finish = lib.wgpuCommandEncoderFinish
        self.submit = lib.wgpuQueueSubmit
        self.release_buffer = lib.wgpuCommandBufferRelease
        self.release_encoder = lib.wgpuCommandEncoderRelease
        self.null = ffi.NULL
        self.submitted = ffi.new("WGPUCommandBuffer[1]")

    def __call__(
        self,
        device: Device,
        commands: Sequence[Command],
        copies: Sequence[tuple[Any, Any, int, int]],
    ) -> bool:
        """Record ``commands`` and ``copies`` ((source, target, target offset, bytes)
        of wgpu-py buffers) and submit them; False, recording nothing, where the raw
        handles cannot be had (then the caller records them as usual). Nothing may be
        recorded on the device and not submitted (`Device.flush` first)."""
        raw = _raw(commands)
        if raw is None or _NATIVE is None:
            return False
        try:
            handles = [(s._internal, t._internal, at, n) for s, t, at, n in copies]
            device_handle, queue = device.handle._internal, device.queue._internal
        except AttributeError:
            return False
        null = self.null
        encoder = self.create(device_handle, null)
        if raw:
            cpass = self.begin(encoder, null)
            _record(cpass, raw)
            self.end(cpass)
            self.release_pass(cpass)
        for source, target, at, nbytes in handles:
            self.copy(encoder, source, 0, target, at, nbytes)
        buffer = self.finish(encoder, null)
        self.submitted[0] = buffer
        self.submit(queue, 1, self.submitted)
        self.release_buffer(buffer)
        self.release_encoder(encoder)
        device.counter.dispatches += len(raw)
        device.counter.submits += 1
        return True


def native_submit() -> NativeSubmit | None:
    """The C-call launch (`NativeSubmit`), or None where `native_calls` is."""
    if _NATIVE is None:
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        return NativeSubmit(_api.lib, _api.ffi)
    except (ImportError, AttributeError):
        return None


def _raw(commands: Sequence[Command]) -> list[RawCommand] | None:
    """The commands' raw handles, made once per `Commands` list."""
    raw = getattr(commands, "raw", None)
    if raw is None:
        try:
            raw = [(p._internal, g._internal, *grid) for p, g, grid, _ in commands]
        except (AttributeError, TypeError, ValueError):
            raw = False
        if isinstance(commands, Commands):
            commands.raw = raw
    return raw if isinstance(raw, list) else None


class Capture:
    """The commands collected so far, and the pool that new arrays come from.

    ``checked``: some command records faults in the device's check slots
    (`asgrad.gpu.device.checks`), so a replay arms the device's checks.
    """

    def __init__(self, scope: ScopedPool) -> None:
        self.scope = scope
        self.commands: list[Command] = Commands()
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


def replay(device: Device, commands: Sequence[Command], first_chunk: int = 32) -> None:
    """Record captured commands into the device's open compute pass.

    Submits come after 32, 64, 128... commands (``first_chunk`` first, doubling up to
    ``device.chunk_dispatches``): the GPU starts on the first kernels while the host
    still encodes the rest, and a long plan costs only a few submits.
    """
    chunk = min(first_chunk, device.chunk_dispatches)
    raw = _raw(commands) if _NATIVE is not None else None
    if raw is not None:
        _replay_native(device, raw, chunk)
        return
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


def _replay_native(device: Device, raw: list[RawCommand], chunk: int) -> None:
    """`replay` as wgpu-native calls on raw handles."""
    start, total = 0, len(raw)
    while start < total:
        cpass = device.compute_pass()._internal
        end = min(total, start + max(chunk - device.recorded(0), 1))
        _record(cpass, raw[start:end])
        if device.recorded(end - start) >= chunk:
            device.flush()
            chunk = min(2 * chunk, device.chunk_dispatches)
        start = end
    device.counter.dispatches += total


def _record(cpass: Any, raw: Sequence[RawCommand]) -> None:
    """Record raw commands into the raw compute pass ``cpass`` in wgpu-native calls,
    skipping a pipeline or bind group that repeats the previous one."""
    assert _NATIVE is not None
    set_pipeline, set_bind_group, dispatch, null = _NATIVE
    last_pipeline = last_group = None
    for pipeline, group, x, y, z in raw:
        if pipeline is not last_pipeline:
            set_pipeline(cpass, pipeline)
            set_bind_group(cpass, 0, group, 0, null)
            last_pipeline, last_group = pipeline, group
        elif group is not last_group:
            set_bind_group(cpass, 0, group, 0, null)
            last_group = group
        dispatch(cpass, x, y, z)


def profile(
    device: Device, commands: Sequence[Command], repeat: int = 16
) -> list[tuple[str, float]]:
    """The GPU time of each captured command: (label, seconds), in order.

    Each command runs once alone, then ``repeat`` times back to back in one submit,
    waiting for each; its time is the difference over ``repeat - 1``, so the cost of
    a submit and a wait (larger than most kernels) cancels out. Meant for finding the
    kernels that dominate: commands that update buffers in place run several times.
    """
    device.synchronize()
    timings = []
    for command in commands:
        start = time.perf_counter()
        replay(device, [command])
        device.synchronize()
        once = time.perf_counter() - start
        start = time.perf_counter()
        replay(device, [command] * repeat, first_chunk=repeat)
        device.synchronize()
        many = time.perf_counter() - start
        timings.append((command[3], max(many - once, 0.0) / (repeat - 1)))
    return timings
