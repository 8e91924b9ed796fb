"""Errors raised by the GPU backend.

They derive from :class:`asgrad.tensor.errors.BackendError`, so ``except AsgradError``
catches them too. Every message names what was asked for, what was found and what to
do about it.
"""

from __future__ import annotations

from asgrad.tensor.errors import BackendError

__all__ = ["GpuError", "GpuUnavailableError", "GpuUnsupportedError"]


class GpuError(BackendError):
    """Base class of every error raised by ``asgrad.gpu``."""


class GpuUnavailableError(GpuError):
    """``backend="gpu"`` was requested but no usable wgpu adapter was found.

    The message says what was tried; the fix is to install a driver (on a CPU-only
    Linux machine ``apt-get install mesa-vulkan-drivers`` gives lavapipe), to install
    ``wgpu``, or to ask for ``"cpu"``/``"auto"`` instead.
    """


class GpuUnsupportedError(GpuError):
    """The GPU backend cannot run something (an op, a dtype, a size) it was given."""
