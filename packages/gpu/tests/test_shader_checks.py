"""Shader modules compiled with each setting of the runtime checks wgpu-native adds
(`asgrad.gpu.device.modules`): the same results, a typed error for a bad setting, and
tuned tiles kept apart per setting."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.device.modules import CHECKS, DEFAULT, checks_setting
from asgrad.gpu.device.pipelines import PipelineCache
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.linalg import matmul
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.tensor.errors import AsgradError

pytestmark = pytest.mark.gpu


def _fresh_pipelines(device: Device, monkeypatch: pytest.MonkeyPatch, checks: str) -> None:
    monkeypatch.setenv("ASGRAD_GPU_SHADER_CHECKS", checks)
    monkeypatch.setattr(device, "pipelines", PipelineCache(device.pipelines.wgpu, device.handle))


@pytest.mark.parametrize("checks", sorted(CHECKS))
def test_kernels_compiled_with_each_checks_setting_compute_what_numpy_does(
    device: Device, monkeypatch: pytest.MonkeyPatch, checks: str
) -> None:
    _fresh_pipelines(device, monkeypatch, checks)
    assert device.pipelines.checks == checks
    rng = np.random.default_rng(7)
    a = rng.standard_normal((67, 45)).astype(np.float32)  # edge tiles: reads past the end
    b = rng.standard_normal((45, 129)).astype(np.float32)
    product = matmul(to_gpu(a, device), to_gpu(b, device))
    np.testing.assert_allclose(product.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    sums = reduce_axis("sum", product, 0).numpy()  # a loop over the rows, another kernel
    np.testing.assert_allclose(sums, (a @ b).sum(0), rtol=1e-4, atol=1e-3)


def test_the_setting_defaults_and_is_read_case_blind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASGRAD_GPU_SHADER_CHECKS", raising=False)
    assert checks_setting() == DEFAULT
    monkeypatch.setenv("ASGRAD_GPU_SHADER_CHECKS", " All ")
    assert checks_setting() == "all"


def test_an_unknown_setting_is_a_typed_error_naming_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASGRAD_GPU_SHADER_CHECKS", "off")
    with pytest.raises(GpuError, match=r"'off'.*all, bounds, none") as info:
        checks_setting()
    assert isinstance(info.value, AsgradError)


def test_tuned_tiles_are_kept_apart_per_checks_setting(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    identities = []
    for checks in ("all", "bounds"):
        _fresh_pipelines(device, monkeypatch, checks)
        identities.append(tuning.identity(device))
    assert identities[0]["checks"] == "all"
    assert identities[1]["checks"] == "bounds"
    assert identities[0] != identities[1]
