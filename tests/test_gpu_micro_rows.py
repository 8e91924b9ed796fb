"""``benchmarks/gpu_micro.py --rows``: a step's row and elementwise kernels, each timed
alone, with the bytes it binds and the copy kernel of the same bytes beside it (a lead
runs it on the H200 to see how far each kernel is from the memory bandwidth)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asgrad.gpu import Device

pytestmark = pytest.mark.gpu


def test_the_row_and_elementwise_kernels_of_a_step_are_timed_against_a_copy(
    device: Device, benchmark_script: Callable[[str], Any]
) -> None:
    rows = benchmark_script("gpu_micro").bench_rows("transformer", steps=0, reps=1, torch=None)
    kinds = {r["kind"] for r in rows}
    assert {"norm", "elementwise"} <= kinds
    norms = [r for r in rows if r["kind"] == "norm"]
    # a layer norm over (batch, seq, d_model) binds its input and output at least
    assert all(r["mb"] > 0 for r in norms)
    if "timestamp-query" in device.capabilities.features:
        assert all(r["us"] > 0 and r["copy_us"] > 0 for r in norms)
    assert "dispatch" not in vars(device)  # the recording wrapper is gone
