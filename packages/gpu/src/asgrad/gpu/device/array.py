"""``GpuArray``: a tensor's data in a pooled device buffer (always C-contiguous), and
``Operand``: an array seen through a strided view, as kernels read it."""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.gpu.device import Device, get_device
from asgrad.gpu.device.buffers import BufferPool, GpuBuffer, ScopedPool
from asgrad.gpu.device.source import storage_dtype, to_storage, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError

__all__ = ["GpuArray", "Operand", "contiguous_strides", "persistent", "slice_view", "to_gpu"]


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


class GpuArray:
    """A C-contiguous array on the GPU.

    ``dtype`` is the logical numpy dtype (what `numpy` returns); the buffer
    holds `storage_dtype` of it (bool as u32, int64 as i32).
    The buffer goes back to the pool when the array is garbage-collected or
    [`release`][asgrad.gpu.GpuArray.release] is called.

    A ``backend="gpu"`` program takes a `GpuArray` as a feed as it is: the run copies it
    into the plan's input buffer on the device (and not even that when the same array
    was that input's feed in the run before), so nothing goes through the host. asgrad
    never writes into an array once made, which is what makes skipping that copy safe.
    Anything else that wants numpy (``np.asarray(a)``, a CPU program) reads it back.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import to_gpu
    >>> to_gpu(np.arange(3, dtype=np.float32)).numpy()
    array([0., 1., 2.], dtype=float32)
    """

    __slots__ = ("__weakref__", "_finalizer", "base", "buffer", "device", "dtype", "shape")
    # the backend whose programs take this array as a feed as it is (asgrad.tensor's Program)
    __asgrad_backend__ = "gpu"

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

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.numpy()  # a fresh array: copy=False cannot be honoured, nor needed
        return host if dtype is None else host.astype(dtype, copy=False)

    def release(self) -> None:
        """Give the buffer back to the pool now (the array must not be used after)."""
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        return f"GpuArray(shape={self.shape}, dtype={self.dtype}, {self.buffer!r})"


def to_gpu(array: Any, device: Device | None = None) -> GpuArray:
    """Upload a host array (one upload); returns a new [`GpuArray`][asgrad.gpu.GpuArray].

    asgrad's ``jax.device_put`` (PyTorch: ``x.to("cuda")``): a ``backend="gpu"`` program
    takes the result as a feed with no upload. A `GpuArray` already on ``device`` is
    returned as it is.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import to_gpu
    >>> a = to_gpu(np.ones((2, 3), np.float32))
    >>> a.shape, a.numpy().sum(), to_gpu(a) is a
    ((2, 3), np.float32(6.0), True)
    """
    dev = device or get_device()
    if isinstance(array, GpuArray) and array.device is dev:
        return array
    host = np.asarray(array)
    out = GpuArray.empty(host.shape, host.dtype, dev)
    if host.size:
        dev.write(out.buffer, to_storage(host, out.storage_dtype))
    return out


def persistent(device: Device, shape: tuple[int, ...], dtype: Any) -> GpuArray:
    """An array from the device's own pool, never a plan's: it outlives any capture."""
    pool = device.pool
    nbytes = max(math.prod(shape), 1) * storage_dtype(dtype).itemsize
    return GpuArray(device, device.alloc(nbytes, pool), shape, dtype, pool=pool)


@dataclass(frozen=True)
class Operand:
    """An input of an elementwise kernel: an array seen through a strided view.

    ``shape`` must broadcast to the output shape; ``strides`` and ``offset`` are in
    elements of the array's buffer. Build with `of` (contiguous) or a view method.
    """

    array: GpuArray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def of(cls, array: GpuArray | Operand) -> Operand:
        """The whole array, contiguous."""
        if isinstance(array, Operand):
            return array
        return cls(array, array.shape, contiguous_strides(array.shape))

    def permute(self, axes: Sequence[int]) -> Operand:
        """Axes reordered (``numpy.transpose``) without a copy. An operand of lower rank
        (a view passed on that only dropped leading 1s) gains them first."""
        lead = len(axes) - len(self.shape)
        shape, strides = (1,) * lead + self.shape, (0,) * lead + self.strides
        return Operand(
            self.array,
            tuple(shape[a] for a in axes),
            tuple(strides[a] for a in axes),
            self.offset,
        )

    def reshape(self, shape: tuple[int, ...]) -> Operand:
        """A new shape of a contiguous operand."""
        if self.strides != contiguous_strides(self.shape):
            raise GpuUnsupportedError("reshape of a non-contiguous view; copy it first")
        return Operand(self.array, shape, contiguous_strides(shape), self.offset)

    def broadcast_strides(self, out_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Strides over ``out_shape`` (0 on broadcast dimensions)."""
        lead = len(out_shape) - len(self.shape)
        if lead < 0:
            raise GpuUnsupportedError(f"operand {self.shape} has more dims than {out_shape}")
        result = [0] * lead
        for size, stride, target in zip(self.shape, self.strides, out_shape[lead:], strict=True):
            if size == target:
                result.append(stride if size != 1 else 0)
            elif size == 1:
                result.append(0)
            else:
                raise GpuUnsupportedError(
                    f"operand of shape {self.shape} does not broadcast to {out_shape}"
                )
        return tuple(result)


def slice_view(x: Operand, index: Sequence[Any]) -> Operand:
    """The strided view ``x[index]`` for basic indexing with ints and slices."""
    shape: list[int] = []
    strides: list[int] = []
    offset = x.offset
    for d, size in enumerate(x.shape):
        item = index[d] if d < len(index) else slice(None)
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            shape.append(len(range(start, stop, step)))
            strides.append(x.strides[d] * step)
            offset += start * x.strides[d]
        else:
            offset += (int(item) % size) * x.strides[d]
    return Operand(x.array, tuple(shape), tuple(strides), offset)
