"""The wgpu device: adapter, limits, buffers, pipelines, dispatch and transfers.

One [`Device`][asgrad.gpu.Device] per process ([`get_device`][asgrad.gpu.get_device]). Work is
recorded into one open compute pass of one command encoder; the encoder is submitted in chunks of
``chunk_dispatches`` and whenever the host needs a result. Readback goes through one
reused ``MAP_READ`` staging buffer, which grows when a larger read comes; mapping it is
also how the host waits for the GPU (``queue.on_submitted_work_done_sync()`` raises in
wgpu-py 0.32).

The subpackage holds what lives on the device: ``buffers`` (the pooled allocator),
``pipelines``, ``source`` (WGSL kernels shipped as package data, specialised), ``array``
(``GpuArray``, ``Operand``), ``copy``, ``checks`` (device-side faults), ``readback``,
``transfers``, ``variables`` (variables' buffers), ``limits``, ``capabilities`` and
``adapters`` (which adapter opens: an index, a rank's local index). It may
import [`asgrad.tensor`][asgrad.tensor], `asgrad.gpu.errors` and itself; nothing of
`asgrad.gpu.lowering` or `asgrad.gpu.plan`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.gpu.device.buffers import BufferPool, GpuBuffer, ScopedPool, size_class
from asgrad.gpu.device.capabilities import Capabilities
from asgrad.gpu.device.checks import DeviceChecks
from asgrad.gpu.device.limits import requested_limits
from asgrad.gpu.device.pipelines import Binding, Pipeline, PipelineCache
from asgrad.gpu.device.transfers import TransferCounter
from asgrad.gpu.errors import GpuError, GpuUnavailableError, GpuUnsupportedError

if TYPE_CHECKING:
    from asgrad.gpu.plan.capture import Capture

__all__ = ["Device", "fold_groups", "get_device", "last_unavailable_reason", "opened"]

_device: Device | None = None
_unavailable: str | None = None
_lock = threading.Lock()


def ensure_runtime_dir() -> None:
    """Give the process a private ``XDG_RUNTIME_DIR`` when it has none (Linux).

    Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid or not set" on every
    start without one (headless machines, containers, CI); a private, empty folder
    (mode 0700, removed at exit) silences it and changes nothing else.
    """
    current = os.environ.get("XDG_RUNTIME_DIR", "")
    if not sys.platform.startswith("linux") or (current and os.path.isdir(current)):
        return
    folder = tempfile.mkdtemp(prefix="asgrad-xdg-")  # mkdtemp makes it 0700
    atexit.register(shutil.rmtree, folder, True)
    os.environ["XDG_RUNTIME_DIR"] = folder


def _import_wgpu() -> Any:
    try:
        import wgpu  # untyped: the root pyproject ignores its missing stubs
    except ImportError as exc:
        raise GpuUnavailableError(
            f"the GPU backend needs the 'wgpu' package ({exc}); "
            "install it with: pip install 'asgrad[gpu]'"
        ) from exc
    return wgpu


def get_device() -> Device:
    """The process-wide [`Device`][asgrad.gpu.Device], created on first use.

    Raises [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError] (and remembers why) when no
    adapter is found.

    >>> from asgrad.gpu import get_device  # doctest: +REQUIRES_GPU
    >>> get_device() is get_device()
    True
    """
    global _device, _unavailable
    with _lock:
        if _device is not None:
            return _device
        if _unavailable is not None:
            raise GpuUnavailableError(_unavailable)
        try:
            _device = Device.open()
        except GpuUnavailableError as exc:
            _unavailable = str(exc)
            raise
        return _device


def opened() -> bool:
    """Whether the process's device has been created (its adapter is fixed then)."""
    return _device is not None


def last_unavailable_reason() -> str:
    """Why [`get_device`][asgrad.gpu.get_device] last failed ('' if it has not)."""
    return _unavailable or ""


def fold_groups(n_groups: int, max_per_dim: int = 65535) -> tuple[int, int, int]:
    """Fold a 1-D launch of ``n_groups`` workgroups into a 2-D grid within the limit.

    Kernels recover the linear id as ``wid.x + wid.y * num_workgroups.x`` and must
    bounds-check it (the grid may be a little larger than asked).

    >>> fold_groups(10), fold_groups(70000)
    ((10, 1, 1), (35000, 2, 1))
    """
    if n_groups <= max_per_dim:
        return (max(n_groups, 1), 1, 1)
    y = -(-n_groups // max_per_dim)
    x = -(-n_groups // y)
    if y > max_per_dim:
        raise GpuUnsupportedError(
            f"a launch of {n_groups} workgroups exceeds {max_per_dim}^2; split the tensor"
        )
    return (x, y, 1)


class Device:
    """A wgpu device with asgrad's pools and caches. Use [`get_device`][asgrad.gpu.get_device].

    >>> from asgrad.gpu import Device, get_device  # doctest: +REQUIRES_GPU
    >>> device = get_device()
    >>> isinstance(device, Device), device.capabilities.adapter != ""
    (True, True)
    """

    chunk_dispatches = 256

    def __init__(self, wgpu: Any, adapter: Any) -> None:
        self.wgpu = wgpu
        self.adapter = adapter
        adapter_limits = {k: int(v) for k, v in dict(adapter.limits).items()}
        limits = requested_limits(adapter_limits)
        # timestamp-query: only for Device.gpu_seconds (benchmarks, the matmul tuner);
        # subgroup: kernels may use subgroup operations (Capabilities.subgroups); neither
        # costs anything unused
        wanted = ("shader-f16", "timestamp-query", "subgroup")
        wanted_features = [f for f in wanted if f in adapter.features]
        try:
            self.handle = adapter.request_device_sync(
                label="asgrad",
                required_features=wanted_features,
                required_limits=limits,
            )
        except Exception as exc:  # wgpu raises its own error types
            raise GpuUnavailableError(f"the adapter refused a device: {exc}") from exc
        self.queue = self.handle.queue
        self.limits = limits
        info = adapter.info
        self.capabilities = Capabilities(
            adapter=str(info.get("device", "")),
            vendor=str(info.get("vendor", "")),
            backend=str(info.get("backend_type", "")),
            adapter_type=str(info.get("adapter_type", "")),
            description=str(info.get("description", "")),
            limits=dict(limits),
            adapter_limits=adapter_limits,
            features=tuple(sorted(wanted_features)),
            adapter_features=tuple(sorted(str(f) for f in adapter.features)),
        )
        self.counter = TransferCounter()
        usage = wgpu.BufferUsage
        storage_usage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        self.pool = BufferPool(
            lambda size: self.handle.create_buffer(size=size, usage=storage_usage)
        )
        self.max_groups = limits["max-compute-workgroups-per-dimension"]
        self.max_binding = limits["max-storage-buffer-binding-size"]
        self._staging: Any = None
        self._staging_size = 0
        self._sync_buffer = self.pool.acquire(4)
        self._params: dict[bytes, GpuBuffer] = {}
        self.pipelines = PipelineCache(wgpu, self.handle)
        self._encoder: Any = None
        self._pass: Any = None
        self._pending = 0
        self.capture: Capture | None = None  # set by asgrad.gpu.plan.capture.capturing
        self.checks = DeviceChecks(self)  # faults kernels record, raised at a readback

    # ----------------------------------------------------------------- creation
    @classmethod
    def open(cls) -> Device:
        """Find an adapter (the one selected, else high-performance preferred) and create
        the device (see `asgrad.gpu.device.adapters`)."""
        from asgrad.gpu.device.adapters import choose_adapter

        wgpu = _import_wgpu()
        ensure_runtime_dir()
        try:
            adapter = choose_adapter(wgpu)
            if adapter is None:
                adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except GpuUnavailableError:
            raise
        except Exception as exc:  # no adapter, no driver, no loader
            backend = os.environ.get("WGPU_BACKEND_TYPE", "any")
            raise GpuUnavailableError(
                f"no GPU adapter found (WGPU_BACKEND_TYPE={backend}): {exc}. "
                "Install a Vulkan/Metal/DX12 driver (CPU-only Linux: "
                "apt-get install mesa-vulkan-drivers) or use backend='cpu'"
            ) from exc
        if adapter is None:
            raise GpuUnavailableError("wgpu returned no adapter; use backend='cpu'")
        return cls(wgpu, adapter)

    # ----------------------------------------------------------------- buffers
    @property
    def current_pool(self) -> BufferPool | ScopedPool:
        """Where new arrays come from: a plan's pool while one is captured."""
        return self.capture.scope if self.capture is not None else self.pool

    def alloc(self, nbytes: int, pool: BufferPool | ScopedPool | None = None) -> GpuBuffer:
        """A pooled storage buffer of at least ``nbytes`` (contents undefined)."""
        if nbytes > self.max_binding:
            raise GpuUnsupportedError(
                f"a tensor of {nbytes} bytes exceeds the storage binding limit "
                f"{self.max_binding} of {self.capabilities.adapter}"
            )
        return (pool or self.current_pool).acquire(nbytes)

    def release(self, buffer: GpuBuffer) -> None:
        """Give ``buffer`` back to the pool (work already recorded still sees it)."""
        self.pool.release(buffer)

    def write(self, buffer: GpuBuffer, data: np.ndarray) -> None:
        """Upload ``data`` (C-contiguous) into ``buffer`` at offset 0.

        Recorded work is submitted first: ``queue.write_buffer`` would otherwise take
        effect before the commands recorded earlier that still read the old contents.
        """
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if raw.nbytes % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        if self._pending:
            self.flush()
        self.queue.write_buffer(buffer.handle, 0, raw)
        self.counter.uploads += 1
        self.counter.upload_bytes += int(raw.nbytes)

    def read(self, buffer: GpuBuffer, nbytes: int) -> bytes:
        """Submit recorded work; copy ``nbytes`` of ``buffer`` to the host."""
        return self.read_many([(buffer, nbytes)])[0]

    def synchronize(self) -> None:
        """Block until every submitted command has finished."""
        self._ensure_staging(4)
        self._end_pass()
        self._open_encoder().copy_buffer_to_buffer(self._sync_buffer.handle, 0, self._staging, 0, 4)
        self.flush()
        self._staging.map_sync(self.wgpu.MapMode.READ, 0, 4)
        self._staging.unmap()

    def _ensure_staging(self, nbytes: int) -> None:
        if nbytes <= self._staging_size:
            return
        if self._pending:
            # recorded copies may still target the old staging buffer
            self.flush()
        if self._staging is not None:
            self._staging.destroy()
        size = size_class(nbytes)
        usage = self.wgpu.BufferUsage
        self._staging = self.handle.create_buffer(
            size=size, usage=usage.MAP_READ | usage.COPY_DST, label="asgrad-staging"
        )
        self._staging_size = size

    def params(self, data: bytes) -> GpuBuffer:
        """A uniform buffer holding ``data`` (shapes, strides), cached by content."""
        buf = self._params.get(data)
        if buf is None:
            padded = data + b"\0" * (-len(data) % 16)
            usage = self.wgpu.BufferUsage.UNIFORM
            handle = self.handle.create_buffer_with_data(data=padded or b"\0" * 16, usage=usage)
            buf = GpuBuffer(handle, len(padded))
            self._params[data] = buf
            self.counter.param_uploads += 1
        return buf

    # ----------------------------------------------------------------- pipelines
    def pipeline(
        self,
        key: tuple[Any, ...],
        source: Callable[[], str],
        bindings: Sequence[Binding],
        constants: dict[str, float | int] | None = None,
    ) -> Pipeline:
        """The pipeline for ``key``, compiled once (see `PipelineCache.get`)."""
        return self.pipelines.get(key, source, bindings, constants)

    # ----------------------------------------------------------------- dispatch
    def _open_encoder(self) -> Any:
        if self._encoder is None:
            self._encoder = self.handle.create_command_encoder()
        return self._encoder

    def _end_pass(self) -> None:
        if self._pass is not None:
            self._pass.end()
            self._pass = None

    def encoder(self) -> Any:
        """The open command encoder, its compute pass ended (to record copies)."""
        self._end_pass()
        return self._open_encoder()

    def compute_pass(self, **options: Any) -> Any:
        """The open compute pass; one is begun (with ``options``) if none is open."""
        if self._pass is None:
            self._pass = self._open_encoder().begin_compute_pass(**options)
        return self._pass

    def recorded(self, count: int = 1) -> int:
        """Count ``count`` more commands recorded since the last submit; returns the count."""
        self._pending += count
        return self._pending

    def dispatch(
        self, pipe: Pipeline, buffers: Sequence[GpuBuffer], groups: tuple[int, int, int]
    ) -> None:
        """Record one dispatch of ``pipe`` over ``groups`` in the open pass."""
        if len(buffers) != len(pipe.bindings):
            raise GpuError(
                f"kernel {pipe.name} takes {len(pipe.bindings)} buffers, got {len(buffers)}"
            )
        if max(groups) > self.max_groups:
            raise GpuUnsupportedError(f"kernel {pipe.name}: grid {groups} exceeds limits")
        group = self.pipelines.bind_group(pipe, buffers)
        if self.capture is not None:
            self.capture.commands.append((pipe.handle, group, groups, pipe.label))
            self.capture.checked |= pipe.checked
            return
        if pipe.checked:
            self.checks.armed = True
        cpass = self.compute_pass()
        cpass.set_pipeline(pipe.handle)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(*groups)
        self.counter.dispatches += 1
        if self.recorded() >= self.chunk_dispatches:
            self.flush()

    def gpu_seconds(self, record: Callable[[], object]) -> float | None:
        """GPU time of the dispatches ``record()`` makes, from timestamp queries.

        The dispatches go into one compute pass with a timestamp at its start and end
        (no submit in between), so the time excludes host encoding, submission and the
        wait. ``None`` when the adapter has no ``timestamp-query``.
        """
        if "timestamp-query" not in self.capabilities.features:
            return None
        wgpu = self.wgpu
        self.flush()
        queries = self.handle.create_query_set(type=wgpu.QueryType.timestamp, count=2)
        resolved = self.handle.create_buffer(
            size=256, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
        )
        self.compute_pass(
            timestamp_writes={
                "query_set": queries,
                "beginning_of_pass_write_index": 0,
                "end_of_pass_write_index": 1,
            }
        )
        chunk, self.chunk_dispatches = self.chunk_dispatches, 1 << 30  # one pass
        try:
            record()
        finally:
            self.chunk_dispatches = chunk
        self._end_pass()
        self._open_encoder().resolve_query_set(queries, 0, 2, resolved, 0)
        stamps = np.frombuffer(self.read(GpuBuffer(resolved, 256), 16), dtype=np.uint64)
        resolved.destroy()
        queries.destroy()
        return float(stamps[1] - stamps[0]) * 1e-9  # nanoseconds (WebGPU)

    def read_many(self, items: Sequence[tuple[GpuBuffer, int]]) -> list[bytes]:
        """Read several buffers with one submit and one mapping (one readback).

        When a checking kernel ran since the last readback, the checks' summary word
        comes along, and a recorded fault raises here (`asgrad.gpu.device.checks`).
        """
        if not items:
            return []
        flag = self.checks.flag_item()
        copies = [*items, flag] if flag is not None else list(items)
        offsets = []
        total = 0
        for _, nbytes in copies:
            offsets.append(total)
            total += -(-max(nbytes, 4) // 8) * 8
        self._ensure_staging(total)
        self._end_pass()
        encoder = self._open_encoder()
        for (buffer, nbytes), offset in zip(copies, offsets, strict=True):
            encoder.copy_buffer_to_buffer(
                buffer.handle, 0, self._staging, offset, -(-max(nbytes, 4) // 4) * 4
            )
        self.flush()
        self._staging.map_sync(self.wgpu.MapMode.READ, 0, total)
        try:
            data = bytes(self._staging.read_mapped(0, total))
        finally:
            self._staging.unmap()
        self.counter.readbacks += 1
        self.counter.readback_bytes += sum(n for _, n in items)
        if flag is not None:
            self.checks.verify(data[offsets[-1] : offsets[-1] + 4])
        return [data[o : o + n] for (_, n), o in zip(items, offsets[: len(items)], strict=True)]

    def copy(
        self,
        src: GpuBuffer,
        dst: GpuBuffer,
        nbytes: int,
        *,
        src_offset: int = 0,
        dst_offset: int = 0,
    ) -> None:
        """Record a buffer-to-buffer copy of ``nbytes`` (ends the open compute pass).

        Sizes and offsets are in bytes, multiples of 4 (WebGPU's rule).
        """
        if (nbytes | src_offset | dst_offset) % 4:
            raise GpuUnsupportedError(
                f"a buffer copy moves whole 4-byte words: {nbytes} bytes from offset"
                f" {src_offset} to {dst_offset}"
            )
        self._end_pass()
        self._open_encoder().copy_buffer_to_buffer(
            src.handle, src_offset, dst.handle, dst_offset, nbytes
        )
        self._pending += 1
        self.counter.device_copies += 1
        self.counter.device_copy_bytes += nbytes

    def flush(self) -> None:
        """Submit everything recorded so far (does not wait)."""
        self._end_pass()
        if self._encoder is not None:
            self.queue.submit([self._encoder.finish()])
            self._encoder = None
            self.counter.submits += 1
        self._pending = 0
