"""``benchmarks/gpu_micro.py --half-elementwise``: every float16 and float32 kernel it
times compiles and computes what its name says (a lead runs it on the H200 to find
what makes float16 elementwise kernels slow)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering.elementwise import elementwise

pytestmark = pytest.mark.gpu


def test_every_half_elementwise_case_runs_and_reports(
    device: Device, benchmark_script: Callable[[str], Any]
) -> None:
    rows = benchmark_script("gpu_micro").bench_half_elementwise(4096, reps=1)
    names = [r["case"] for r in rows]
    assert "copy f16" in names
    assert "gelu f16 in f32 (f16())" in names
    assert all(r["n"] == 4096 for r in rows)


def test_the_gelu_computed_in_float32_rounds_once(
    device: Device, benchmark_script: Callable[[str], Any]
) -> None:
    gelu = benchmark_script("gpu_micro")._GELU_F32.format(v="f32(x0)")
    x = np.linspace(-6, 6, 1001).astype(np.float16)
    got = elementwise(f"f16({gelu})", [to_gpu(x, device)], np.float16).numpy()
    erf = np.vectorize(math.erf)
    xf = x.astype(np.float64)
    want = (0.5 * xf * (1 + erf(xf / np.sqrt(2)))).astype(np.float16)
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3
    )
