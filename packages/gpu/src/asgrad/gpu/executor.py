"""The GPU backend of ``asgrad.tensor``'s executor: ``backend="gpu"``.

A :class:`~asgrad.tensor.executor.Schedule` is compiled, once per set of fed shapes,
into a *plan*: every node lowered to WGSL kernel launches (:mod:`asgrad.gpu.lowering`)
whose dispatches are captured with their bind groups, over buffers that a plan-owned
pool reuses by liveness (an intermediate's buffer is free after its last use). Running
the plan uploads the feeds into their fixed buffers, replays the captured dispatches in
one compute pass (submitted in chunks), and reads every output back with one mapping.

Parameters live in a :class:`GpuVariableStore`: uploaded once, updated in place on the
device by the plan's update copies, and fetched back only when someone reads
``Variable.value``. A training step therefore moves the batch up and the loss down.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.buffers import ScopedPool
from asgrad.gpu.device import Command, Device, get_device
from asgrad.gpu.errors import GpuError, GpuUnavailableError
from asgrad.gpu.lowering import lower, numpy_dtype
from asgrad.gpu.ops.copy import copy_into
from asgrad.gpu.source import storage_dtype, to_storage
from asgrad.tensor.backends import Executable, register_backend
from asgrad.tensor.executor import Schedule
from asgrad.tensor.graph import Variable, VariableHolder

__all__ = ["GpuBackend", "GpuExecutable", "GpuVariableStore", "variable_store"]

_stores: dict[int, GpuVariableStore] = {}


def variable_store(device: Device | None = None) -> GpuVariableStore:
    """The variable store of ``device`` (one per device)."""
    dev = device or get_device()
    store = _stores.get(id(dev))
    if store is None:
        store = _stores[id(dev)] = GpuVariableStore(dev)
    return store


class GpuVariableStore(VariableHolder):
    """Variables' values in GPU buffers, mirrored from the host name->array store.

    Each variable gets one buffer for its lifetime, so compiled plans can bind it once.
    The host value is uploaded when it is newer than the device's (first use, or after
    ``variable.value = ...``); a value updated on the device is read back only when
    ``variable.value`` is read.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self._arrays: dict[int, tuple[Variable, GpuArray]] = {}
        self._dirty: set[int] = set()

    def array(self, variable: Variable) -> GpuArray:
        """The buffer of ``variable`` (allocated on first use; contents per :meth:`sync`)."""
        entry = self._arrays.get(id(variable))
        if entry is None:
            host = variable.host_value()
            array = _persistent(self.device, host.shape, numpy_dtype(host.dtype.name))
            entry = self._arrays[id(variable)] = (variable, array)
        return entry[1]

    def sync(self, variable: Variable) -> None:
        """Upload the host value if the device does not hold the newest one."""
        if variable.holder is self:
            return
        value = variable.value  # fetched from another holder if one has it
        array = self.array(variable)
        self.device.write(array.buffer, to_storage(np.asarray(value), array.storage_dtype))
        variable.hold(self)
        self._dirty.discard(id(variable))

    def mark_updated(self, variable: Variable) -> None:
        """The device now holds a newer value than the host."""
        self._dirty.add(id(variable))
        variable.hold(self)

    def fetch(self, variable: Variable) -> np.ndarray:
        """The newest value of ``variable`` (a readback only if the device changed it)."""
        if id(variable) not in self._dirty:
            return variable.host_value()
        self._dirty.discard(id(variable))
        return self._arrays[id(variable)][1].numpy().astype(variable.host_value().dtype)

    def release(self, variable: Variable) -> None:
        """The host was given a new value; the next run uploads it."""
        self._dirty.discard(id(variable))


def _persistent(device: Device, shape: tuple[int, ...], dtype: np.dtype[Any]) -> GpuArray:
    """An array from the device's pool (not a plan's): it outlives any capture."""
    pool = device.pool
    nbytes = max(int(np.prod(shape)), 1) * storage_dtype(dtype).itemsize
    return GpuArray(device, device.alloc(nbytes, pool), shape, dtype, pool=pool)


class _Plan:
    """A schedule lowered for one set of fed shapes: captured dispatches + buffers."""

    def __init__(self, schedule: Schedule, feeds: Mapping[str, np.ndarray], device: Device):
        self.device = device
        self.scope = ScopedPool(device.pool)
        self._closer = weakref.finalize(self, self.scope.close)
        store = variable_store(device)
        types = schedule.infer_types({name: v.shape for name, v in feeds.items()})
        self.inputs: dict[str, GpuArray] = {}
        self.keep: list[GpuArray] = []  # constants: alive as long as the plan
        self.variables: list[Variable] = []
        values: dict[int, GpuArray] = {}
        freed_after: dict[int, list[int]] = {}
        for node_id, step in schedule.last_use.items():
            freed_after.setdefault(step, []).append(node_id)
        device.begin_capture(self.scope)
        try:
            for i, node in enumerate(schedule.nodes):
                out_type = types[node.id]
                if node.op == "input":
                    arr = GpuArray.empty(out_type.shape, numpy_dtype(out_type.dtype), device)
                    self.inputs[node.name] = arr
                elif node.op == "parameter":
                    var = node.attrs["variable"]
                    self.variables.append(var)
                    arr = store.array(var)
                elif node.op == "constant":
                    # uploaded now, read at every replay: never a scope buffer that
                    # captured kernels might overwrite
                    value = np.asarray(node.attrs["value"])
                    arr = _persistent(device, value.shape, numpy_dtype(out_type.dtype))
                    if value.size:
                        device.write(arr.buffer, to_storage(np.asarray(value), arr.storage_dtype))
                    self.keep.append(arr)
                else:
                    ins = [values[n.id] for n in node.inputs]
                    try:
                        arr = lower(node.op, ins, node.attrs, out_type)
                    except GpuError as exc:
                        raise type(exc)(f"{node.op} (made at {node.location}): {exc}") from exc
                values[node.id] = arr
                for dead in freed_after.get(i, []):
                    values.pop(dead, None)
            self.outputs = [values[n.id] for n in schedule.outputs]
            self.updates: list[tuple[Variable, GpuArray]] = []
            for var, node in schedule.updates:
                target = store.array(var)
                new_value = values[node.id]
                if new_value.buffer is not target.buffer:
                    copy_into(new_value, target)
                self.updates.append((var, target))
        finally:
            self.commands: list[Command] = device.end_capture()

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        device = self.device
        store = variable_store(device)
        for var in self.variables:
            store.sync(var)
        for name, arr in self.inputs.items():
            value = feeds[name]
            if value.size:
                device.write(arr.buffer, to_storage(np.asarray(value), arr.storage_dtype))
        device.replay(self.commands)
        for var, _ in self.updates:
            store.mark_updated(var)
        if not self.outputs:
            device.flush()
            return []
        raw = device.read_many([(a.buffer, a.nbytes) for a in self.outputs])
        results = []
        for data, arr in zip(raw, self.outputs, strict=True):
            host = np.frombuffer(data, arr.storage_dtype, count=arr.size).reshape(arr.shape)
            results.append(host.astype(arr.dtype))
        return results


class GpuExecutable:
    """A schedule compiled for the GPU; plans are cached by the fed shapes."""

    def __init__(self, schedule: Schedule, device: Device) -> None:
        self.schedule = schedule
        self.device = device
        self._plans: dict[tuple[Any, ...], _Plan] = {}

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        key = tuple((name, v.shape, v.dtype.str) for name, v in sorted(feeds.items()))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(self.schedule, feeds, self.device)
        return plan.run(feeds)


class GpuBackend:
    """``backend="gpu"``: runs schedules with WGSL kernels through wgpu."""

    name = "gpu"

    def available(self) -> bool:
        """Whether an adapter can be opened."""
        try:
            get_device()
        except GpuUnavailableError:
            return False
        return True

    def compile(self, schedule: Schedule) -> Executable:
        """Compile ``schedule`` (raises :class:`GpuUnavailableError` without an adapter)."""
        return GpuExecutable(schedule, get_device())


register_backend("gpu", GpuBackend)
