"""Launched runs' outputs on their way to the host: pages of a readback ring.

[`GpuExecutable.launch`][asgrad.gpu.GpuExecutable.launch] does not wait
for its run. After replaying the plan it records copies of the outputs (and of the
device checks' summary word, when a checking kernel ran) into the open *page*: a
``MAP_READ`` staging buffer that many consecutive launches share, each at its own
offset, so a loop reading its loss only now and then costs one mapping for a page of
steps. The plan's output buffers are free for the next launch as soon as the copies
are recorded, since every command runs in queue order.

A page closes when it is full, after `ReadbackRing.LAUNCHES_PER_PAGE` launches,
or when one of its values is read; reading maps it (waiting for the last launch that
copied into it, not for later ones), keeps its bytes on the host and gives the buffer
back for reuse. At most `ReadbackRing.PAGES_IN_FLIGHT` closed pages stay unread:
past that the oldest is read, whether anyone keeps its values or not. That bounds how
far the host runs ahead of the device (as a CUDA launch queue does) and how much
device memory waiting values hold; a page read that way keeps its bytes only while
some value of it is alive.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.gpu.device.buffers import size_class
from asgrad.tensor.errors import AsgradError
from asgrad.tensor.runtime.device_values import DeviceValue

if TYPE_CHECKING:
    from asgrad.gpu.device import Device
    from asgrad.gpu.device.array import GpuArray

__all__ = ["LaunchReadback", "Outputs", "Page", "ReadbackRing", "launch_values", "readback_ring"]

_rings: dict[int, ReadbackRing] = {}


def readback_ring(device: Device) -> ReadbackRing:
    """The readback ring of ``device`` (one per device)."""
    ring = _rings.get(id(device))
    if ring is None:
        ring = _rings[id(device)] = ReadbackRing(device)
    return ring


def _span(nbytes: int) -> int:
    """Bytes a copy of ``nbytes`` takes in a page (copies are 4-byte multiples; 8-aligned)."""
    return -(-max(nbytes, 4) // 8) * 8


class Page:
    """One staging buffer that several launches copy their outputs into."""

    def __init__(self, ring: ReadbackRing, handle: Any, size: int) -> None:
        self.ring = ring
        self.handle: Any = handle
        self.size = size
        self.used = 0
        self.launches = 0
        self.data: bytes | None = None
        self._finalizer = weakref.finalize(self, ring.recycle, handle, size)

    def fetch(self) -> bytes:
        """The page's bytes on the host (maps it the first time: waits for its copies)."""
        if self.data is None:
            ring = self.ring
            if ring.current is self:
                ring.current = None
            device = ring.device
            device.flush()  # launches submit their copies; this is for safety only
            self.handle.map_sync(device.wgpu.MapMode.READ, 0, self.used)
            try:
                self.data = bytes(self.handle.read_mapped(0, self.used))
            finally:
                self.handle.unmap()
            device.counter.readbacks += 1
            device.counter.readback_bytes += self.used
            self._finalizer()  # the buffer goes back to the ring for another page
            self.handle = None
        return self.data


class Outputs:
    """A plan's outputs as launches copy them, worked out once per plan."""

    def __init__(self, arrays: Sequence[GpuArray]) -> None:
        spans = [_span(a.nbytes) for a in arrays]
        # (source buffer, bytes to copy: a multiple of 4, bytes taken in the page)
        self.copies = [
            (a.buffer.handle, -(-max(a.nbytes, 4) // 4) * 4, span)
            for a, span in zip(arrays, spans, strict=True)
        ]
        self.layout = [(a.shape, a.dtype, a.storage_dtype, a.size) for a in arrays]
        self.nbytes = sum(spans)


class LaunchReadback:
    """The outputs of one launch: where in its page each one was copied."""

    def __init__(
        self, page: Page, outputs: Outputs, offsets: Sequence[int], check_offset: int | None
    ) -> None:
        self._page: Page | None = page
        self._device = page.ring.device
        self._layout = outputs.layout
        self._offsets = offsets
        self._check_offset = check_offset
        self._values: list[np.ndarray] | None = None
        self._error: AsgradError | None = None

    def ready(self) -> bool:
        """Whether the page has been read (reading then costs no wait)."""
        return self._values is not None or (self._page is not None and self._page.data is not None)

    def result(self) -> list[np.ndarray]:
        """Every output on the host; raises a fault the device checks recorded."""
        if self._error is not None:
            raise self._error
        if self._values is None:
            assert self._page is not None
            data = self._page.fetch()
            self._page = None  # the bytes are copied out below; the page may go
            if self._check_offset is not None:
                at = self._check_offset
                try:
                    self._device.checks.verify(data[at : at + 4])
                except AsgradError as exc:
                    self._error = exc
                    raise
            self._values = [
                np.frombuffer(data, storage, count=size, offset=at).reshape(shape).astype(dtype)
                for (shape, dtype, storage, size), at in zip(
                    self._layout, self._offsets, strict=True
                )
            ]
        return self._values


class ReadbackRing:
    """The pages of one device: the open one, the closed unread ones, spare buffers."""

    PAGE_BYTES = 4096
    LAUNCHES_PER_PAGE = 64
    PAGES_IN_FLIGHT = 4

    def __init__(self, device: Device) -> None:
        self.device = device
        self.current: Page | None = None
        self._closed: deque[Page] = deque()
        self._spare: dict[int, list[Any]] = {}
        self.created = 0  # staging buffers made (the others were reused)

    def recycle(self, handle: Any, size: int) -> None:
        """Keep an unmapped page buffer for a later page."""
        self._spare.setdefault(size, []).append(handle)

    def launch(self, outputs: Outputs) -> LaunchReadback:
        """Record copies of a plan's ``outputs`` into the open page and submit."""
        readback, copies = self.place(outputs)
        self.submit(copies)
        return readback

    def submit(self, copies: Sequence[tuple[Any, Any, int, int]]) -> None:
        """Record the copies `place` made (after whatever is recorded) and submit."""
        copy = self.device.encoder().copy_buffer_to_buffer
        for source, target, at, nbytes in copies:
            copy(source, 0, target, at, nbytes)
        self.device.flush()

    def place(self, outputs: Outputs) -> tuple[LaunchReadback, list[tuple[Any, Any, int, int]]]:
        """Room in the open page for a launch's ``outputs`` (and the checks' word when
        armed): its readback, and the copies to record before the next submit, each
        (source buffer, page buffer, offset in the page, bytes)."""
        checks = self.device.checks
        page = self._page_for(outputs.nbytes + (8 if checks.armed else 0))
        target = page.handle
        offsets = []
        copies = []
        at = page.used
        for source, nbytes, span in outputs.copies:
            copies.append((source, target, at, nbytes))
            offsets.append(at)
            at += span
        check_offset = None
        if checks.armed:  # stays armed: a synchronous readback checks as well
            copies.append((checks.buffer.handle, target, at, 4))
            check_offset = at
            at += 8
        page.used = at
        page.launches += 1
        return LaunchReadback(page, outputs, offsets, check_offset), copies

    def _page_for(self, total: int) -> Page:
        page = self.current
        room = page is not None and page.used + total <= page.size
        if page is not None and room and page.launches < self.LAUNCHES_PER_PAGE:
            return page
        if page is not None:
            self._closed.append(page)
        while len(self._closed) >= self.PAGES_IN_FLIGHT:
            self._closed.popleft().fetch()  # waits for the device if it is that far behind
        size = size_class(max(total, self.PAGE_BYTES))
        spare = self._spare.get(size)
        if spare:
            handle = spare.pop()
        else:
            self.created += 1
            usage = self.device.wgpu.BufferUsage
            handle = self.device.handle.create_buffer(
                size=size, usage=usage.MAP_READ | usage.COPY_DST, label="asgrad-readback"
            )
        self.current = Page(self, handle, size)
        return self.current


def launch_values(readback: LaunchReadback, outputs: Outputs) -> list[DeviceValue]:
    """One [`DeviceValue`][asgrad.tensor.DeviceValue] per output of a launch."""
    return [
        DeviceValue(readback, i, shape, dtype)
        for i, (shape, dtype, _, _) in enumerate(outputs.layout)
    ]
