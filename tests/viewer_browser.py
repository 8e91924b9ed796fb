"""Fixtures of the viewer's tests: a headless Chromium driven by Selenium.

Browser tests (marked ``browser``) skip when Chromium, its driver or Selenium is
missing, unless ``ASGRAD_REQUIRE_BROWSER=1`` (set by ``.ci/run``): then they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def _find(names: tuple[str, ...]) -> str | None:
    for name in names:
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
