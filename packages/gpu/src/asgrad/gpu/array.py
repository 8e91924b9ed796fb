"""``GpuArray``: a tensor's data in a pooled device buffer (always C-contiguous)."""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from asgrad.gpu.buffers import BufferPool, GpuBuffer, ScopedPool
from asgrad.gpu.device import Device, get_device
from asgrad.gpu.source import storage_dtype, to_storage, wgsl_type

__all__ = ["GpuArray", "to_gpu"]


class GpuArray:
    """A C-contiguous array on the GPU.

    ``dtype`` is the logical numpy dtype (what :meth:`numpy` returns); the buffer
    holds :func:`~asgrad.gpu.source.storage_dtype` of it (bool as u32, int64 as i32).
    The buffer goes back to the pool when the array is garbage-collected or
    :meth:`release` is called.

    >>> import numpy as np                                  # doctest: +SKIP
    >>> to_gpu(np.arange(3, dtype=np.float32)).numpy()      # doctest: +SKIP
    array([0., 1., 2.], dtype=float32)
    """

    __slots__ = ("__weakref__", "_finalizer", "base", "buffer", "device", "dtype", "shape")

    def __init__(
        self,
        device: Device,
        buffer: GpuBuffer,
        shape: tuple[int, ...],
        dtype: Any,
        owned: bool = True,
        base: GpuArray | None = None,
        pool: BufferPool | ScopedPool | None = None,
    ) -> None:
        self.device = device
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.base = base  # an alias keeps the array that owns its buffer alive
        release = (pool or device.pool).release
        self._finalizer = weakref.finalize(self, release, buffer) if owned else None

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: Any, device: Device | None = None) -> GpuArray:
        """An uninitialised array from the device's current pool.

        While a plan is compiled that is the plan's own pool, and the buffer goes back
        to it when the array is garbage-collected.
        """
        dev = device or get_device()
        nbytes = max(math.prod(shape), 1) * storage_dtype(dtype).itemsize
        pool = dev.current_pool
        return cls(dev, dev.alloc(nbytes, pool), shape, dtype, pool=pool)

    def view(self, shape: tuple[int, ...], dtype: Any = None) -> GpuArray:
        """The same buffer seen with another shape (or a dtype of the same storage)."""
        return GpuArray(
            self.device,
            self.buffer,
            shape,
            self.dtype if dtype is None else dtype,
            owned=False,
            base=self.base or self,
        )

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored elements."""
        return self.size * self.storage_dtype.itemsize

    @property
    def storage_dtype(self) -> np.dtype:
        """The dtype the buffer holds."""
        return storage_dtype(self.dtype)

    @property
    def wgsl(self) -> str:
        """The WGSL element type of the buffer."""
        return wgsl_type(self.dtype)

    def numpy(self) -> np.ndarray:
        """Read the array back to the host (one readback)."""
        if self.size == 0:
            return np.zeros(self.shape, self.dtype)
        raw = self.device.read(self.buffer, self.nbytes)
        host = np.frombuffer(raw, self.storage_dtype).reshape(self.shape)
        return host.astype(self.dtype, copy=True)

    def release(self) -> None:
        """Give the buffer back to the pool now (the array must not be used after)."""
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        return f"GpuArray(shape={self.shape}, dtype={self.dtype}, {self.buffer!r})"


def to_gpu(array: Any, device: Device | None = None) -> GpuArray:
    """Upload a host array (one upload); returns a new :class:`GpuArray`."""
    host = np.asarray(array)
    dev = device or get_device()
    out = GpuArray.empty(host.shape, host.dtype, dev)
    if host.size:
        dev.write(out.buffer, to_storage(host, out.storage_dtype))
    return out
