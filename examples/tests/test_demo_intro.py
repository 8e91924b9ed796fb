"""`hatch run demo` says first what it shows and how long it takes."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("asgrad_demo_script", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_says_what_it_shows_and_how_long_before_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = _load_demo()
    ran: list[tuple[str, list[str], str]] = []

    def fake_run_module(module: str, **kwargs: Any) -> None:
        ran.append((module, list(sys.argv), capsys.readouterr().out))

    monkeypatch.setattr(runpy, "run_module", fake_run_module)
    monkeypatch.setattr(sys, "argv", ["demo.py", "--steps", "5"])
    assert demo.main() == 0
    ((module, argv, printed_first),) = ran
    assert module == "asgrad.examples.transformer"
    assert argv == ["asgrad.examples.transformer", "--steps", "5"]
    first = printed_first.splitlines()[0]
    assert first.startswith("running python -m asgrad.examples.transformer: it trains")
    assert "800 steps" in first
    assert "It takes about" in first
    assert "minute" in first
    assert "text sample" in first
