"""Errors raised by the GPU backend.

They derive from [`asgrad.tensor.errors.BackendError`][asgrad.tensor.BackendError], so ``except
AsgradError`` catches them too. Every message names what was asked for, what was found and what to
do about it.
"""

from __future__ import annotations

from asgrad.tensor.errors import BackendError

__all__ = [
    "GpuError",
    "GpuFloat16Error",
    "GpuIntegerOverflowError",
    "GpuUnavailableError",
    "GpuUnsupportedError",
]


class GpuError(BackendError):
    """Base class of every error raised by ``asgrad.gpu``.

    >>> from asgrad.gpu import GpuError
    >>> [c.__name__ for c in GpuError.__bases__]
    ['BackendError']
    """


class GpuUnavailableError(GpuError):
    """``backend="gpu"`` was requested but no usable wgpu adapter was found.

    The message says what was tried; the fix is to install a driver (on a CPU-only
    Linux machine ``apt-get install mesa-vulkan-drivers`` gives lavapipe), to install
    ``wgpu``, or to ask for ``"cpu"``/``"auto"`` instead.

    >>> from asgrad.gpu import GpuUnavailableError
    >>> [c.__name__ for c in GpuUnavailableError.__bases__]
    ['GpuError']
    """


class GpuUnsupportedError(GpuError):
    """The GPU backend cannot run something (an op, a dtype, a size) it was given.

    >>> from asgrad.gpu import GpuUnsupportedError
    >>> [c.__name__ for c in GpuUnsupportedError.__bases__]
    ['GpuError']
    """


class GpuIntegerOverflowError(GpuUnsupportedError, OverflowError):
    """An integer result does not fit the GPU's int32 storage.

    GPU buffers hold int64 values as int32. An int64 add, subtract, multiply, negate,
    abs, cast from float, or a sum (of int32 or int64 values: the CPU returns it
    exactly, as int64) whose exact value leaves the int32 range is flagged by the
    kernel and raised at the next readback (see `asgrad.gpu.device.checks`). int32
    elementwise arithmetic wraps instead, on both backends, as numpy's does.

    >>> from asgrad.gpu import GpuIntegerOverflowError
    >>> [c.__name__ for c in GpuIntegerOverflowError.__bases__]
    ['GpuUnsupportedError', 'OverflowError']
    """


class GpuFloat16Error(GpuUnsupportedError):
    """A float16 value met an op that has no float16 kernel on the GPU, or a device
    without the ``shader-f16`` feature.

    The message names the op (or the kernel) and the fix: cast to float32 around the
    op (``x.cast("float32")``, then back with ``.cast("float16")``), or run on a device
    that grants ``shader-f16``. See the GPU guide's float16 section for which ops have
    a float16 kernel.

    >>> from asgrad.gpu import GpuFloat16Error
    >>> [c.__name__ for c in GpuFloat16Error.__bases__]
    ['GpuUnsupportedError']
    """
