"""asgrad's GPU backend: WGSL compute kernels run through wgpu.

>>> from asgrad.gpu import resolve_backend
>>> resolve_backend("cpu")
'cpu'

``python -m asgrad.gpu info`` prints the adapter's capability record;
``python -m asgrad.gpu coverage`` the op-coverage table.
"""

from asgrad.gpu.array import GpuArray, to_gpu
from asgrad.gpu.capabilities import Capabilities
from asgrad.gpu.device import Device, get_device
from asgrad.gpu.errors import (
    GpuError,
    GpuUnavailableError,
    GpuUnsupportedError,
)
from asgrad.gpu.executor import GpuBackend, GpuExecutable
from asgrad.gpu.selection import ENV_VAR, gpu_available, resolve_backend
from asgrad.gpu.transfers import TransferCounter
from asgrad.gpu.variables import GpuVariableStore, variable_store

__all__ = [
    "ENV_VAR",
    "Capabilities",
    "Device",
    "GpuArray",
    "GpuBackend",
    "GpuError",
    "GpuExecutable",
    "GpuUnavailableError",
    "GpuUnsupportedError",
    "GpuVariableStore",
    "TransferCounter",
    "get_device",
    "gpu_available",
    "resolve_backend",
    "to_gpu",
    "variable_store",
]
