"""The ``backend="auto"`` CPU-fallback warning points at the user's line."""

from __future__ import annotations

import importlib.metadata
import sys
import warnings
from typing import Any

import numpy as np
import pytest

import asgrad.tensor.runtime.backends as backends
from asgrad.tensor import Graph, compile, evaluate
from asgrad.tensor.runtime.backends import resolve_backend_name


class _Unusable:
    """A plug-in backend that cannot run here, so ``auto`` falls back to the CPU."""

    name = "toy"

    def available(self) -> bool:
        return False

    def compile(self, schedule: Any) -> Any:
        raise AssertionError("never compiled")


@pytest.fixture(autouse=True)
def unusable_plug_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **params: [])
    monkeypatch.setattr(backends, "_ENTRY_POINTS", None)
    monkeypatch.setattr(backends, "_BACKENDS", {"cpu": backends._cpu_backend, "toy": _Unusable})
    monkeypatch.setattr(backends, "_warned_fallback", False)
    monkeypatch.delenv(backends.ENV_VAR, raising=False)


def _caught(call: Any) -> warnings.WarningMessage:
    """The one warning ``call()`` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert issubclass(caught[0].category, RuntimeWarning)
    assert "backend 'auto' runs on the CPU" in str(caught[0].message)
    return caught[0]


def test_direct_call_points_at_the_callers_line() -> None:
    line = sys._getframe().f_lineno + 1
    warning = _caught(lambda: resolve_backend_name("auto"))
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_compile_points_at_the_users_line_not_the_librarys() -> None:
    g = Graph()
    x = g.input("x", (3,))
    line = sys._getframe().f_lineno + 1
    warning = _caught(lambda: compile([x + 1.0], backend="auto"))
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_evaluate_points_at_the_users_line() -> None:
    g = Graph()
    x = g.input("x", (2,))
    line = sys._getframe().f_lineno + 1
    warning = _caught(lambda: evaluate([x * 2.0], {"x": np.ones(2, np.float32)}, backend="auto"))
    assert (warning.filename, warning.lineno) == (__file__, line)
