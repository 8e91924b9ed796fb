"""Fixtures of asgrad.tensor's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from asgrad.tensor.cpu.jit import route, threads


@pytest.fixture
def fresh_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The compiled kernels' thread choice from scratch: an empty cache folder (its
    path), no thread or route settings, no decisions, a new step; a new step after."""
    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.delenv(route.ENV, raising=False)
    monkeypatch.setattr(threads, "ROUTE", route.Route("threads"))
    threads.new_step()
    yield tmp_path
    threads.new_step()
