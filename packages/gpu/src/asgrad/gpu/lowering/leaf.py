"""The leaf family on the GPU: input, parameter and constant launch no kernel.

A plan binds each leaf to a buffer: an input to one the feed is uploaded into at every
run, a parameter to its variable's buffer in the variable store, a constant to one
uploaded once when the plan is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.gpu.device import Device
from asgrad.gpu.device.array import GpuArray, persistent
from asgrad.gpu.device.source import numpy_dtype, storage_dtype, to_storage
from asgrad.gpu.device.variables import GpuVariableStore
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node, Variable

__all__ = ["LEAVES", "WGSL_FILES", "Bindings", "plan_owned", "upload_constant"]

LEAVES = frozenset({"input", "parameter", "constant"})
WGSL_FILES: tuple[str, ...] = ()


def upload_constant(device: Device, host: np.ndarray, dtype: Any) -> GpuArray:
    """``host`` uploaded now into a buffer of the device's own pool.

    Read at every replay of a plan, so never a plan buffer that captured kernels
    might overwrite.
    """
    value = persistent(device, host.shape, dtype)
    if host.size:
        device.write(value.buffer, to_storage(host, value.storage_dtype))
    return value


def plan_owned(device: Device, shape: tuple[int, ...], dtype: Any) -> GpuArray:
    """An array for the plan being compiled that no other value of the plan reuses: a
    buffer written outside the plan's kernels (a feed uploaded before each replay, a
    constant uploaded once) must not be one that an earlier kernel of the plan writes.

    It comes fresh from the device's pool, owned by the plan's scope (handed back when
    the plan goes) but never put on the scope's free lists. Outside a capture: an
    ordinary array.
    """
    capture = device.capture
    if capture is None:
        return GpuArray.empty(shape, dtype, device)
    nbytes = max(math.prod(shape), 1) * storage_dtype(dtype).itemsize
    buffer = capture.scope.parent.acquire(nbytes)
    capture.scope.owned.append(buffer)
    return GpuArray(device, buffer, shape, dtype, owned=False)


@dataclass
class Bindings:
    """The buffers a plan binds its leaves to."""

    inputs: dict[str, GpuArray] = field(default_factory=dict)  # uploaded at every run
    variables: list[Variable] = field(default_factory=list)  # synced before every run
    constants: list[GpuArray] = field(default_factory=list)  # alive as long as the plan

    def bind(
        self, node: Node, out_type: TensorType, device: Device, store: GpuVariableStore
    ) -> GpuArray:
        """The buffer of leaf ``node`` (allocated from the plan's pool for an input)."""
        dtype = numpy_dtype(out_type.dtype)
        if node.op == "input":
            array = plan_owned(device, out_type.shape, dtype)
            self.inputs[node.name] = array
            return array
        if node.op == "parameter":
            variable = node.attrs["variable"]
            self.variables.append(variable)
            return store.array(variable)
        constant = upload_constant(device, np.asarray(node.attrs["value"]), dtype)
        self.constants.append(constant)
        return constant
