"""The GPU backend: ``backend="gpu"`` compiles schedules into WGSL kernel launches.

A [`Schedule`][asgrad.tensor.Schedule] is compiled, once per set of fed shapes,
into a plan (`asgrad.gpu.plan`): every node lowered to kernel launches
(`asgrad.gpu.lowering`) whose dispatches are captured with their bind groups,
over buffers that a plan-owned pool reuses by liveness. Running the plan uploads the
feeds into their fixed buffers, replays the captured dispatches in one compute pass
(submitted in chunks), and reads every output back with one mapping; or, launched
([`GpuExecutable.launch`][asgrad.gpu.GpuExecutable.launch]), queues the outputs' readback
(`asgrad.gpu.device.readback`) and returns without waiting for the device.

A feed may be a [`GpuArray`][asgrad.gpu.GpuArray] already on the device
([`to_gpu`][asgrad.gpu.to_gpu], or a batch of
``asgrad.nn.data.DataLoader(..., device="gpu")``): the run copies it into the input's
buffer on the device instead of uploading, and skips even that when the same array
was that input's feed in the plan's run before, so a step fed the same device arrays
every time moves no data at all.

Parameters live in a [`GpuVariableStore`][asgrad.gpu.GpuVariableStore]: uploaded once,
updated in place on the device by the plan's update copies, and fetched back only when
someone reads ``Variable.value``. A training step therefore moves the batch up and the
loss down.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.gpu.data import take_rows
from asgrad.gpu.device import Device, get_device, opened
from asgrad.gpu.device.adapters import select_adapter
from asgrad.gpu.device.array import GpuArray, to_gpu
from asgrad.gpu.device.readback import Outputs, launch_values, readback_ring
from asgrad.gpu.device.source import to_storage
from asgrad.gpu.device.variables import variable_store
from asgrad.gpu.errors import GpuError, GpuUnavailableError
from asgrad.gpu.plan import Plan, build_plan
from asgrad.gpu.plan.capture import native_submit, replay
from asgrad.tensor.ir.cache import LRUCache
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.runtime.backends import Executable
from asgrad.tensor.runtime.device_values import DeviceValue
from asgrad.tensor.runtime.progress import reporting

__all__ = [
    "Feed",
    "GpuBackend",
    "GpuExecutable",
    "feed_on_device",
    "launch_plan",
    "run_plan",
    "start_plan",
]

_SUBMIT = native_submit()  # a launch's encoder, pass and submit in wgpu-native calls

Feed = np.ndarray | GpuArray
"""What a GPU run is fed per input: a host array (uploaded) or a device array (copied
on the device)."""


class GpuExecutable:
    """A schedule compiled for the GPU; plans are cached by the fed shapes.

    A plan holds its device buffers, so the `MAX_PLANS` used most recently are
    kept; a program fed many batch sizes rebuilds the plans it dropped.

    >>> from asgrad.tensor import Graph, compile  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import GpuExecutable
    >>> x = Graph().input("x", (3,))
    >>> program = compile([x + 1.0], backend="gpu")
    >>> isinstance(program.executable, GpuExecutable), program({"x": [0.0, 1.0, 2.0]})[0].tolist()
    (True, [1.0, 2.0, 3.0])
    """

    MAX_PLANS = 8

    def __init__(self, schedule: Schedule, device: Device) -> None:
        self.schedule = schedule
        self.device = device
        self._plans: LRUCache[tuple[Any, ...], Plan] = LRUCache(self.MAX_PLANS)
        # the shapes and dtypes of the last run's feeds, and its plan: a loop feeding the
        # same kinds of arrays finds it without building and hashing a key
        self._last: tuple[tuple[tuple[str, tuple[int, ...], Any], ...], Plan] | None = None

    def run(self, feeds: Mapping[str, Feed]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        return run_plan(self.plan(feeds), feeds)

    def launch(self, feeds: Mapping[str, Feed]) -> list[DeviceValue]:
        """Start one run on ``feeds`` without waiting; the outputs are read when asked."""
        return launch_plan(self.plan(feeds), feeds)

    def transient_bytes(self, feeds: Mapping[str, Feed]) -> int:
        """The device bytes a run on feeds shaped as ``feeds`` takes besides the variables
        and the constants: its plan's buffers (the plan is built, nothing runs)."""
        return self.plan(feeds).scope.allocated_bytes

    def plan(self, feeds: Mapping[str, Feed]) -> Plan:
        """The plan for the shapes and dtypes of ``feeds`` (built on first need)."""
        last = self._last
        if last is not None and len(feeds) == len(last[0]):
            for name, shape, dtype in last[0]:
                value = feeds.get(name)
                if value is None or value.shape != shape or value.dtype != dtype:
                    break
            else:
                return last[1]  # the most recently used entry already
        key = tuple((name, v.shape, v.dtype.str) for name, v in sorted(feeds.items()))
        plan = self._plans.get(key)
        if plan is None:
            shapes = ", ".join(str(list(v.shape)) for _, v in sorted(feeds.items()))
            with reporting(f"first GPU run at shapes {shapes}"):
                plan = self._plans.put(key, build_plan(self.schedule, feeds, self.device))
        self._last = (tuple((name, v.shape, v.dtype) for name, v in feeds.items()), plan)
        return plan


def run_plan(plan: Plan, feeds: Mapping[str, Feed]) -> list[np.ndarray]:
    """Upload the feeds (and stale variables), replay the plan, read the outputs back."""
    device = plan.device
    start_plan(plan, feeds)
    if not plan.outputs:
        device.flush()
        return []
    raw = device.read_many([(a.buffer, a.nbytes) for a in plan.outputs])
    results = []
    for data, arr in zip(raw, plan.outputs, strict=True):
        host = np.frombuffer(data, arr.storage_dtype, count=arr.size).reshape(arr.shape)
        results.append(host.astype(arr.dtype))
    return results


def launch_plan(plan: Plan, feeds: Mapping[str, Feed]) -> list[DeviceValue]:
    """Upload the feeds, replay the plan and queue the outputs' readback; no waiting.

    The dispatches go in submits as large as the device allows: the device is busy
    with the steps launched before, so starting this one early gains nothing. A step
    that fits one submit is recorded in wgpu-native's C calls
    (`asgrad.gpu.plan.capture.NativeSubmit`): encoder, pass, dispatches, the outputs'
    copies into the readback page and the submit, with no wgpu-py object per call.
    """
    device = plan.device
    if not plan.outputs:
        start_plan(plan, feeds, device.chunk_dispatches)
        device.flush()
        return []
    outputs = plan.launch_outputs
    if outputs is None:
        outputs = plan.launch_outputs = Outputs(plan.outputs)
    if _SUBMIT is not None and len(plan.commands) <= device.chunk_dispatches:
        # the whole step in wgpu-native calls: one encoder, pass, copies and submit
        _before_replay(plan, feeds)
        device.flush()  # a device feed's copy, recorded above, goes first
        if plan.checked:
            device.checks.armed = True  # the page takes the check word too
        ring = readback_ring(device)
        readback, copies = ring.place(outputs)
        if not _SUBMIT(device, plan.commands, copies):  # no raw handles: as below
            replay(device, plan.commands, device.chunk_dispatches)
            ring.submit(copies)
        _after_replay(plan)
        return launch_values(readback, outputs)
    start_plan(plan, feeds, device.chunk_dispatches)
    return launch_values(readback_ring(device).launch(outputs), outputs)


def start_plan(plan: Plan, feeds: Mapping[str, Feed], first_chunk: int = 32) -> None:
    """Upload the feeds (and stale variables) and record the plan's dispatches.

    A [`GpuArray`][asgrad.gpu.GpuArray] feed is copied on the device (`feed_on_device`).
    ``first_chunk``: the dispatches of the first submit (see `replay`).
    """
    _before_replay(plan, feeds)
    replay(plan.device, plan.commands, first_chunk)
    if plan.checked:
        plan.device.checks.armed = True  # the next readback brings the check word along
    _after_replay(plan)


def _before_replay(plan: Plan, feeds: Mapping[str, Feed]) -> None:
    """The variables synced (unless none left the device since the plan's last run)
    and the feeds uploaded or recorded as device copies."""
    device = plan.device
    store = variable_store(device)
    if plan.synced != store.generation:  # else every variable is on the device still
        for var in plan.bindings.variables:
            store.sync(var)
    for name, arr in plan.bindings.inputs.items():
        value = feeds[name]
        if isinstance(value, GpuArray):
            feed_on_device(plan, name, value, arr)
            continue
        plan.device_feeds.pop(name, None)
        if value.size:
            device.write(arr.buffer, to_storage(np.asarray(value), arr.storage_dtype))


def _after_replay(plan: Plan) -> None:
    """The updated variables marked as newer on the device (unless still marked)."""
    store = variable_store(plan.device)
    if plan.synced != store.generation:
        for var, _ in plan.updates:
            store.mark_updated(var)
        plan.synced = store.generation


def feed_on_device(plan: Plan, name: str, value: GpuArray, target: GpuArray) -> None:
    """Record the copy of device feed ``value`` into ``target``, input ``name``'s buffer.

    No copy when ``target`` holds ``value`` already: the same array object (alive, so
    its buffer is its own) fed to this input in the run before, since asgrad never
    writes into a `GpuArray` once made, nor a plan's kernels into an input's buffer.
    """
    held = plan.device_feeds.get(name)
    if held is not None and held() is value:
        return
    if value.device is not plan.device:
        raise GpuError(
            f"input {name!r} was fed a GpuArray of another device; place it with"
            " asgrad.gpu.to_gpu on the program's device"
        )
    if value.nbytes:
        plan.device_feeds.pop(name, None)  # a failed copy leaves the buffer unknown
        # pooled buffers are multiples of 256 bytes: rounding up to a word stays inside
        plan.device.copy(value.buffer, target.buffer, -(-value.nbytes // 4) * 4)
    plan.device_feeds[name] = weakref.ref(value)


class GpuBackend:
    """``backend="gpu"``: runs schedules with WGSL kernels through wgpu.

    The factory of the ``asgrad.backends`` entry point ``gpu``. It is a ``DataBackend``
    (`asgrad.tensor.runtime.backends`): a data loader keeps data sets on its device.

    >>> from asgrad.tensor import Graph, evaluate  # doctest: +REQUIRES_GPU
    >>> import asgrad.gpu  # registers the backend "gpu"
    >>> x = Graph().input("x", (3,))
    >>> evaluate(x * 2.0, {"x": [1.0, 2.0, 3.0]}, backend="gpu")[0].tolist()
    [2.0, 4.0, 6.0]
    """

    name = "gpu"

    def available(self) -> bool:
        """Whether an adapter can be opened."""
        try:
            get_device()
        except GpuUnavailableError:
            return False
        return True

    def select_device(self, index: int, *, automatic: bool = False, label: str = "") -> bool:
        """Open adapter ``index`` when the device opens (`asgrad.gpu.select_adapter`);
        False, choosing nothing, when the device is open already.

        How a process group gives each rank its device without importing ``asgrad.gpu``
        (`asgrad.nn.distributed.init` finds this method on the backend).
        """
        if opened():
            return False
        select_adapter(index, automatic=automatic, label=label)
        return True

    def to_device(self, array: np.ndarray) -> GpuArray:
        """``array`` uploaded once ([`to_gpu`][asgrad.gpu.to_gpu] on the process's device)."""
        return to_gpu(array)

    def holds(self, nbytes: int) -> bool:
        """Whether one array of ``nbytes`` fits in a storage binding of the device."""
        return nbytes <= get_device().max_binding

    def take(
        self, arrays: Sequence[GpuArray], order: GpuArray, start: int, stop: int
    ) -> tuple[GpuArray, ...]:
        """``a[order[start:stop]]`` of each array, gathered on the device
        (`asgrad.gpu.data.take_rows`)."""
        return take_rows(arrays, order, start, stop)

    def compile(self, schedule: Schedule) -> Executable:
        """Compile ``schedule`` (raises [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError]
        without an adapter)."""
        return GpuExecutable(schedule, get_device())
