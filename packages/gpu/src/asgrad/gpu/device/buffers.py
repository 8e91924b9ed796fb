"""Pooled device buffers, keyed by size class and reused by liveness.

A buffer handed back with `BufferPool.release` goes on its size class's free
list and is handed out again to the next request of that class. Reuse is safe without
waiting for the GPU because every command is ordered on the one queue: the kernel that
writes the reused buffer runs after the last kernel that read it.
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["BufferPool", "GpuBuffer", "size_class"]

_MIN_CLASS = 256
_serials = itertools.count(1)


def size_class(nbytes: int) -> int:
    """The pooled size for a request of ``nbytes``: four classes per power of two.

    Waste is at most 25 % (plus rounding to 256 bytes).

    >>> [size_class(n) for n in (1, 256, 257, 1000, 5000)]
    [256, 256, 512, 1024, 5120]
    """
    n = max(int(nbytes), _MIN_CLASS)
    top = 1 << (n - 1).bit_length()  # next power of two >= n
    if top <= 1024:
        return top
    step = top // 8  # classes at 5/8, 6/8, 7/8 and 8/8 of the next power of two
    return -(-n // step) * step


class GpuBuffer:
    """A wgpu storage buffer with a serial number (bind groups are cached by serial)."""

    __slots__ = ("__weakref__", "handle", "serial", "size")

    def __init__(self, handle: Any, size: int) -> None:
        self.handle = handle
        self.size = size
        self.serial = next(_serials)

    def __repr__(self) -> str:
        return f"GpuBuffer(#{self.serial}, {self.size} bytes)"


class BufferPool:
    """Free lists of storage buffers by size class."""

    def __init__(self, create: Any) -> None:
        # ``create(size) -> wgpu buffer``, injected: the pool is testable without a GPU.
        self._create = create
        self._free: dict[int, list[GpuBuffer]] = {}
        self.allocated_bytes = 0
        self.created = 0
        self.reused = 0

    def acquire(self, nbytes: int) -> GpuBuffer:
        """A buffer of at least ``nbytes`` (rounded to its size class)."""
        cls = size_class(nbytes)
        free = self._free.get(cls)
        if free:
            self.reused += 1
            return free.pop()
        self.created += 1
        self.allocated_bytes += cls
        return GpuBuffer(self._create(cls), cls)

    def release(self, buffer: GpuBuffer) -> None:
        """Hand ``buffer`` back; the next request of its size class may get it."""
        self._free.setdefault(buffer.size, []).append(buffer)

    def trim(self) -> int:
        """Destroy every free buffer; returns the bytes given back to the driver."""
        freed = 0
        for bufs in self._free.values():
            for buf in bufs:
                freed += buf.size
                buf.handle.destroy()
        self._free.clear()
        self.allocated_bytes -= freed
        return freed


class ScopedPool:
    """Buffers borrowed from a parent pool for one compiled plan.

    Released buffers go on the scope's own free lists, so they are reused only by later
    allocations of the same plan, whose commands run in the order they were recorded;
    `close` hands every buffer back to the parent.
    """

    def __init__(self, parent: BufferPool) -> None:
        self.parent = parent
        self._free: dict[int, list[GpuBuffer]] = {}
        self.owned: list[GpuBuffer] = []

    def acquire(self, nbytes: int) -> GpuBuffer:
        """A buffer of at least ``nbytes`` for this scope."""
        free = self._free.get(size_class(nbytes))
        if free:
            return free.pop()
        buffer = self.parent.acquire(nbytes)
        self.owned.append(buffer)
        return buffer

    def release(self, buffer: GpuBuffer) -> None:
        """Make ``buffer`` available to later allocations of this scope."""
        self._free.setdefault(buffer.size, []).append(buffer)

    @property
    def allocated_bytes(self) -> int:
        """Bytes borrowed from the parent."""
        return sum(b.size for b in self.owned)

    def close(self) -> None:
        """Give every borrowed buffer back to the parent."""
        for buffer in self.owned:
            self.parent.release(buffer)
        self.owned.clear()
        self._free.clear()
