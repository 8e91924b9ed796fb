"""asgrad's GPU backend: WGSL compute kernels run through wgpu.

Importing ``asgrad.gpu`` registers the backend ``"gpu"`` with ``asgrad.tensor`` (the
``asgrad.backends`` entry point ``gpu`` names the same factory,
[`GpuBackend`][asgrad.gpu.GpuBackend]).

>>> from asgrad.gpu import resolve_backend
>>> resolve_backend("cpu")
'cpu'

``python -m asgrad.gpu info`` prints the adapter's capability record;
``python -m asgrad.gpu coverage`` the GPU's op coverage.
"""

from asgrad.gpu.backend import GpuBackend, GpuExecutable
from asgrad.gpu.device import Device, get_device
from asgrad.gpu.device.array import GpuArray, to_gpu
from asgrad.gpu.device.capabilities import Capabilities
from asgrad.gpu.device.transfers import TransferCounter
from asgrad.gpu.device.variables import GpuVariableStore, variable_store
from asgrad.gpu.errors import (
    GpuError,
    GpuFloat16Error,
    GpuIntegerOverflowError,
    GpuUnavailableError,
    GpuUnsupportedError,
)
from asgrad.gpu.selection import ENV_VAR, gpu_available, resolve_backend
from asgrad.tensor.runtime.backends import register_backend

__version__ = "0.1.0"

register_backend("gpu", GpuBackend)

__all__ = [
    "ENV_VAR",
    "Capabilities",
    "Device",
    "GpuArray",
    "GpuBackend",
    "GpuError",
    "GpuExecutable",
    "GpuFloat16Error",
    "GpuIntegerOverflowError",
    "GpuUnavailableError",
    "GpuUnsupportedError",
    "GpuVariableStore",
    "TransferCounter",
    "__version__",
    "get_device",
    "gpu_available",
    "resolve_backend",
    "to_gpu",
    "variable_store",
]
