"""The device layer: backend selection, limits, pooling, folding, transfers."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import (
    Device,
    GpuUnavailableError,
    resolve_backend,
    to_gpu,
)
from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.buffers import BufferPool, size_class
from asgrad.gpu.device.limits import WEBGPU_DEFAULT_LIMITS, requested_limits
from asgrad.tensor.errors import BackendError


def test_cpu_is_always_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASGRAD_DEVICE", raising=False)
    assert resolve_backend("cpu") == "cpu"
    assert resolve_backend(None) == "cpu"


def test_environment_decides_when_no_backend_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASGRAD_DEVICE", "cpu")
    assert resolve_backend(None) == "cpu"
    monkeypatch.setenv("ASGRAD_DEVICE", "gpu")
    assert resolve_backend("cpu") == "cpu"  # an explicit name wins


def test_unknown_backend_names_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASGRAD_DEVICE", raising=False)
    with pytest.raises(BackendError, match="cpu, gpu, auto"):
        resolve_backend("tpu")


def _no_adapter() -> Device:
    raise GpuUnavailableError("no adapter in this test")


def test_gpu_without_adapter_raises_a_typed_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("asgrad.gpu.device.get_device", _no_adapter)
    with pytest.raises(GpuUnavailableError, match="no adapter"):
        resolve_backend("gpu")
    assert issubclass(GpuUnavailableError, BackendError)


def test_limits_are_webgpu_defaults_not_adapter_maximums() -> None:
    adapter = {name: value * 4 for name, value in WEBGPU_DEFAULT_LIMITS.items()}
    adapter["max-bind-groups-plus-vertex-buffers"] = 0  # lavapipe reports 0
    got = requested_limits(adapter)
    assert got["max-compute-invocations-per-workgroup"] == 256
    assert got["max-compute-workgroup-storage-size"] == 32768  # larger matmul tiles, capped
    assert got["max-bind-groups-plus-vertex-buffers"] == 0
    assert got["min-storage-buffer-offset-alignment"] == 1024  # never below adapter
    assert got["max-buffer-size"] == 4 * WEBGPU_DEFAULT_LIMITS["max-buffer-size"]


def test_size_classes_waste_at_most_a_quarter() -> None:
    for n in [1, 255, 256, 257, 1000, 4097, 123_457, 10**7, 3 * 10**8]:
        cls = size_class(n)
        assert cls >= n
        assert cls % 256 == 0
        assert cls <= max(256, int(n * 1.25) + 256)


class _FakeBuffer:
    destroyed = 0

    def destroy(self) -> None:
        _FakeBuffer.destroyed += 1


def test_pool_reuses_released_buffers_by_class() -> None:
    pool = BufferPool(lambda size: _FakeBuffer())
    a = pool.acquire(1000)
    pool.release(a)
    b = pool.acquire(900)  # same class (1024)
    assert b is a
    c = pool.acquire(5000)
    assert c is not a
    pool.release(b)
    pool.release(c)
    assert pool.created == 2
    assert pool.reused == 1
    assert pool.trim() == 1024 + 5120


def test_fold_groups_stays_within_the_limit() -> None:
    assert fold_groups(65535) == (65535, 1, 1)
    x, y, z = fold_groups(200_001)
    assert x <= 65535
    assert y <= 65535
    assert x * y >= 200_001
    assert z == 1


@pytest.mark.gpu
def test_capabilities_name_the_adapter(device: Device) -> None:
    caps = device.capabilities
    assert caps.adapter
    assert caps.backend
    assert caps.limits["max-compute-invocations-per-workgroup"] == 256
    text = caps.format()
    assert caps.adapter in text
    assert "max-buffer-size" in text
    assert '"adapter"' in caps.to_json()


@pytest.mark.gpu
def test_subgroups_and_timestamps_are_requested_where_the_adapter_has_them(
    device: Device,
) -> None:
    caps = device.capabilities
    for feature in ("subgroup", "timestamp-query", "shader-f16"):
        assert (feature in caps.features) == (feature in caps.adapter_features), feature
    assert caps.subgroups == ("subgroup" in caps.adapter_features)


@pytest.mark.gpu
def test_transfer_counter_and_growing_staging(device: Device) -> None:
    before = device.counter.snapshot()
    small = to_gpu(np.arange(3, dtype=np.float32), device)
    big = to_gpu(np.arange(100_000, dtype=np.float32), device)
    assert small.numpy().tolist() == [0.0, 1.0, 2.0]
    assert big.numpy()[-1] == 99_999.0
    assert small.numpy()[2] == 2.0  # staging buffer larger now, still right
    delta = device.counter - before
    assert delta.uploads == 2
    assert delta.readbacks == 3
    assert delta.upload_bytes == 12 + 400_000
    assert delta.readback_bytes == 12 + 400_000 + 12


@pytest.mark.gpu
def test_bool_and_int64_round_trip(device: Device) -> None:
    flags = np.array([True, False, True])
    labels = np.array([3, -1, 7], dtype=np.int64)
    assert to_gpu(flags, device).numpy().tolist() == [True, False, True]
    back = to_gpu(labels, device).numpy()
    assert back.dtype == np.int64
    assert back.tolist() == [3, -1, 7]


@pytest.mark.gpu
def test_released_buffer_is_reused(device: Device) -> None:
    a = to_gpu(np.zeros(1000, np.float32), device)
    buffer = a.buffer
    a.release()
    b = to_gpu(np.ones(1000, np.float32), device)
    assert b.buffer is buffer
    assert b.numpy().sum() == 1000.0


def test_auto_falls_back_to_the_cpu_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    import asgrad.tensor.runtime.backends as backends

    monkeypatch.setattr("asgrad.gpu.backend.get_device", _no_adapter)
    monkeypatch.setattr(backends, "_warned_fallback", False)
    with pytest.warns(RuntimeWarning, match="CPU"):
        assert resolve_backend("auto") == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend("auto") == "cpu"  # warned once per process
