"""Fixtures of the GPU tests: skip without an adapter unless ASGRAD_REQUIRE_GPU=1.

This tree tests ``asgrad.gpu`` with ``asgrad.tensor`` only, as the package depends on
nothing else. The GPU tests that build gradients or train ``asgrad.nn`` models need
packages above ``asgrad.tensor`` and live in the root ``tests/test_gpu_*.py``.
"""

from __future__ import annotations

import os

import pytest

from asgrad.gpu import Device, GpuUnavailableError, get_device


def require_gpu() -> bool:
    """True when a missing adapter must fail the run (CI on lavapipe)."""
    return os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0")


@pytest.fixture(scope="session")
def device() -> Device:
    """The GPU device; skips the test (or fails, under ASGRAD_REQUIRE_GPU=1) if none."""
    try:
        return get_device()
    except GpuUnavailableError as exc:
        if require_gpu():
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter: {exc}")
        pytest.skip(f"no GPU adapter: {exc}")
