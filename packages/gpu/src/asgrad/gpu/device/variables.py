"""Variables' values on the GPU: one buffer per variable, synced with the host lazily."""

from __future__ import annotations

import weakref

import numpy as np

from asgrad.gpu.device import Device, get_device
from asgrad.gpu.device.array import GpuArray, persistent
from asgrad.gpu.device.source import numpy_dtype, to_storage
from asgrad.tensor.ir.graph import Variable, VariableStore

__all__ = ["GpuVariableStore", "variable_store"]

_stores: dict[int, GpuVariableStore] = {}


def variable_store(device: Device | None = None) -> GpuVariableStore:
    """The variable store of ``device`` (one per device).

    >>> from asgrad.gpu import GpuVariableStore, variable_store  # doctest: +REQUIRES_GPU
    >>> isinstance(variable_store(), GpuVariableStore), variable_store() is variable_store()
    (True, True)
    """
    dev = device or get_device()
    store = _stores.get(id(dev))
    if store is None:
        store = _stores[id(dev)] = GpuVariableStore(dev)
    return store


class GpuVariableStore(VariableStore):
    """Variables' values in GPU buffers, mirrored from the host name->array store.

    Each variable gets one buffer for its lifetime, so compiled plans can bind it once.
    The host value is uploaded when it is newer than the device's (first use, or after
    ``variable.value = ...``); a value updated on the device is read back only when
    ``variable.value`` is read.

    The store refers to variables weakly: when a variable is garbage-collected (its
    model, and every graph and compiled program using it, dropped), its buffer goes
    back to the device's pool for reuse, so a dropped model does not keep device memory.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import SGD, Linear, mse_loss
    >>> model = Linear(2, 1, rng=0)
    >>> g = Graph()
    >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    >>> step = SGD(model.parameters(), lr=0.1).compile(mse_loss(model(x), y), backend="gpu")
    >>> _ = step({"x": np.ones((4, 2), np.float32), "y": np.zeros((4, 1), np.float32)})
    >>> model.weight.value.shape  # the updated value, read back from the GPU's store
    (2, 1)
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self._arrays: weakref.WeakKeyDictionary[Variable, GpuArray] = weakref.WeakKeyDictionary()
        self._dirty: weakref.WeakSet[Variable] = weakref.WeakSet()
        # counts the times a variable may have stopped being held here (fetched to the
        # host, given a new value): a plan whose variables were all held at a generation
        # needs no sync while it is unchanged (asgrad.gpu.backend.start_plan)
        self.generation = 0

    def __len__(self) -> int:
        """Number of variables with a buffer (variables still alive)."""
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        """Bytes of the variables' buffers (their stored elements)."""
        return sum(array.nbytes for array in list(self._arrays.values()))

    def array(self, variable: Variable) -> GpuArray:
        """The buffer of ``variable`` (allocated on first use; contents per
        [`sync`][asgrad.gpu.GpuVariableStore.sync])."""
        array = self._arrays.get(variable)
        if array is None:
            host = variable.host_value()
            array = persistent(self.device, host.shape, numpy_dtype(host.dtype.name))
            self._arrays[variable] = array
        return array

    def sync(self, variable: Variable) -> None:
        """Upload the host value if the device does not hold the newest one."""
        if variable.holder is self:
            return
        value = variable.value  # fetched from another store if one has it
        array = self.array(variable)
        self.device.write(array.buffer, to_storage(np.asarray(value), array.storage_dtype))
        variable.hold(self)
        self._dirty.discard(variable)

    def mark_updated(self, variable: Variable) -> None:
        """The device now holds a newer value than the host."""
        self._dirty.add(variable)
        variable.hold(self)

    def fetch(self, variable: Variable) -> np.ndarray:
        """The newest value of ``variable`` (a readback only if the device changed it)."""
        self.generation += 1  # the caller takes the value: the holder is the host now
        if variable not in self._dirty:
            return variable.host_value()
        value = self._arrays[variable].numpy().astype(variable.host_value().dtype)
        self._dirty.discard(variable)  # only once read: a failed read leaves it newer
        return value

    def release(self, variable: Variable) -> None:
        """The host was given a new value; the next run uploads it."""
        self.generation += 1
        self._dirty.discard(variable)
