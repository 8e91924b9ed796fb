"""Fixtures of the root tests: the GPU device for the tests that need gpu and a higher package."""

from __future__ import annotations

import os

import pytest

from asgrad.gpu import Device, GpuUnavailableError, get_device


@pytest.fixture(scope="module")
def device() -> Device:
    """The GPU device; skips (or fails, under ASGRAD_REQUIRE_GPU=1) without an adapter."""
    try:
        return get_device()
    except GpuUnavailableError as exc:
        if os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0"):
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter: {exc}")
        pytest.skip(f"no GPU adapter: {exc}")
