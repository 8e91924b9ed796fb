"""The leaf family on the GPU: input, parameter and constant launch no kernel.

A plan binds each leaf to a buffer: an input to one the feed is uploaded into at every
run, a parameter to its variable's buffer in the variable store, a constant to one
uploaded once when the plan is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray, persistent
from asgrad.gpu.device import Device
from asgrad.gpu.source import numpy_dtype, to_storage
from asgrad.gpu.variables import GpuVariableStore
from asgrad.tensor import TensorType
from asgrad.tensor.graph import Node, Variable

__all__ = ["LEAVES", "WGSL_FILES", "Bindings", "upload_constant"]

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
            array = GpuArray.empty(out_type.shape, dtype, device)
            self.inputs[node.name] = array
            return array
        if node.op == "parameter":
            variable = node.attrs["variable"]
            self.variables.append(variable)
            return store.array(variable)
        constant = upload_constant(device, np.asarray(node.attrs["value"]), dtype)
        self.constants.append(constant)
        return constant
