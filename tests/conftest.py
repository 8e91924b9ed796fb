"""Fixtures of the root tests, which hold what crosses the distributions' layering.

Each package tests itself in ``packages/<pkg>/tests`` (``tests/test_layering.py`` holds
those trees to the packages' import directions). What needs two packages that do not
depend on each other lives here: the GPU tests that differentiate or train
(``test_gpu_*.py``: ``asgrad.gpu`` with ``asgrad.autograd`` or ``asgrad.nn``; the GPU
tests of ``asgrad.gpu`` and ``asgrad.tensor`` alone are in ``packages/gpu/tests``), the
docs, the viewer in a browser, ONNX against PyTorch, the distributions' versions.

The fixtures: the GPU device, the compiled CPU path's line-by-line function, a
benchmark script loaded as a module, and a headless Chromium for the graph viewer's
browser tests."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

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


@pytest.fixture
def line_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The compiled CPU path's line-by-line function, each op or fused group its own
    line (no whole step and no segments, which the line fusions are not for), the
    environment's switch again after the test."""
    from asgrad.tensor.cpu import jit
    from asgrad.tensor.cpu.jit import fuse_segments, step

    monkeypatch.setattr(step, "WORK_LIMIT", 0)
    monkeypatch.setattr(step, "STEP_WORK_LIMIT", 0)
    monkeypatch.setattr(fuse_segments, "SMALL_ELEMENTS", 0)
    yield
    jit.set_enabled(None)


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def benchmark_script() -> Callable[[str], Any]:
    """``load(name)``: ``benchmarks/<name>.py`` as a module of its own (its folder on
    ``sys.path`` for the scripts it imports), loaded again at each call."""

    def load(name: str) -> Any:
        if str(BENCHMARKS) not in sys.path:
            sys.path.insert(0, str(BENCHMARKS))
        path = BENCHMARKS / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"benchmark_{name}_under_test", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


# -- a headless Chromium for the graph viewer's browser tests ---------------------------
BROWSERS = ("chromium", "google-chrome", "chromium-browser")
DRIVERS = ("chromedriver",)


def _find(names: tuple[str, ...]) -> str | None:
    # GitHub's runners keep their chromedriver in $CHROMEWEBDRIVER
    folder = os.environ.get("CHROMEWEBDRIVER")
    for name in names:
        if folder and os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
        found = shutil.which(name) or (
            f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None
        )
        if found:
            return found
    return None


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("ASGRAD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"ASGRAD_REQUIRE_BROWSER=1 but {reason}; install chromium and chromium-driver")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium (Selenium WebDriver) that logs console messages and requests."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed")
    binary, driver_path = _find(BROWSERS), _find(DRIVERS)
    if binary is None or driver_path is None:
        _unavailable("no chromium or chromedriver on PATH")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_script_timeout(300)
    try:
        yield driver
    finally:
        driver.quit()
