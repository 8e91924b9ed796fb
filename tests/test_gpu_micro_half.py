"""``benchmarks/gpu_micro.py --half-elementwise``: every float16 and float32 kernel it
times compiles and computes what its name says (a lead runs it on the H200 to find
what makes float16 elementwise kernels slow)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering.elementwise import elementwise

pytestmark = pytest.mark.gpu

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _module() -> Any:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("gpu_micro_under_test", BENCH / "gpu_micro.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_half_elementwise_case_runs_and_reports(device: Device) -> None:
    rows = _module().bench_half_elementwise(4096, reps=1)
    names = [r["case"] for r in rows]
    assert "copy f16" in names
    assert "gelu f16 in f32 (f16())" in names
    assert all(r["n"] == 4096 for r in rows)


def test_the_gelu_computed_in_float32_rounds_once(device: Device) -> None:
    gelu = _module()._GELU_F32.format(v="f32(x0)")
    x = np.linspace(-6, 6, 1001).astype(np.float16)
    got = elementwise(f"f16({gelu})", [to_gpu(x, device)], np.float16).numpy()
    erf = np.vectorize(math.erf)
    xf = x.astype(np.float64)
    want = (0.5 * xf * (1 + erf(xf / np.sqrt(2)))).astype(np.float16)
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3
    )
