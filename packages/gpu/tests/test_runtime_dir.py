"""No Mesa "XDG_RUNTIME_DIR is invalid" noise when the device opens."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def test_opening_the_device_without_a_runtime_dir_prints_nothing(device: object) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = (
        "import os; from asgrad.gpu import get_device; get_device();"
        " d = os.environ['XDG_RUNTIME_DIR']; print(oct(os.stat(d).st_mode & 0o777))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "XDG_RUNTIME_DIR" not in result.stderr
    assert result.stdout.strip() == "0o700"


def test_an_existing_runtime_dir_is_kept(tmp_path: object, device: object) -> None:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    code = (
        "import os; from asgrad.gpu import get_device; get_device();"
        " print(os.environ['XDG_RUNTIME_DIR'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == str(tmp_path)
