"""Backend selection and discovery: the CPU built in, plug-ins through entry points."""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import asgrad.tensor.runtime.backends as backends
from asgrad.tensor import BackendError, Graph, compile
from asgrad.tensor.cpu import CPUBackend, CPUExecutable
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.runtime.backends import (
    BACKEND_ENTRY_POINT_GROUP,
    Executable,
    get_backend,
    resolve_backend_name,
)


class _Doubler:
    """A toy executable: runs the schedule on the CPU and doubles the outputs."""

    def __init__(self, schedule: Schedule) -> None:
        self.cpu = CPUExecutable(schedule)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return [2 * v for v in self.cpu.run(feeds)]


class ToyBackend:
    """A plug-in backend, made by a zero-argument factory as an entry point names it."""

    name = "toy"
    usable = True

    def available(self) -> bool:
        return self.usable

    def compile(self, schedule: Schedule) -> Executable:
        return _Doubler(schedule)


class _Unusable(ToyBackend):
    usable = False


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Installed ``asgrad.backends`` entry points, ``name -> "module:attr"`` (empty)."""
    installed: dict[str, str] = {}
    asked: list[Any] = []

    def fake(**params: Any) -> list[importlib.metadata.EntryPoint]:
        asked.append(params)
        assert params == {"group": BACKEND_ENTRY_POINT_GROUP}
        return [
            importlib.metadata.EntryPoint(name, value, BACKEND_ENTRY_POINT_GROUP)
            for name, value in installed.items()
        ]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(backends, "_ENTRY_POINTS", None)  # read again, on first need
    monkeypatch.setattr(backends, "_BACKENDS", {"cpu": backends._cpu_backend})
    monkeypatch.setattr(backends, "_warned_fallback", False)
    monkeypatch.delenv(backends.ENV_VAR, raising=False)
    return installed


def test_the_group_is_the_documented_one() -> None:
    assert BACKEND_ENTRY_POINT_GROUP == "asgrad.backends"


def test_the_cpu_is_built_in(entry_points: dict[str, str]) -> None:
    assert isinstance(get_backend("cpu"), CPUBackend)
    assert resolve_backend_name(None) == "cpu"


def test_a_backend_is_discovered_through_its_entry_point(entry_points: dict[str, str]) -> None:
    entry_points["toy"] = f"{__name__}:ToyBackend"
    assert "toy" in backends.backend_names()
    assert resolve_backend_name("toy") == "toy"
    assert isinstance(get_backend("toy"), ToyBackend)
    g = Graph()
    x = g.input("x", (3,))
    program = compile([x + 1.0], backend="toy")
    assert program({"x": np.zeros(3, np.float32)})[0].tolist() == [2.0, 2.0, 2.0]


def test_auto_takes_a_usable_plug_in(entry_points: dict[str, str]) -> None:
    entry_points["toy"] = f"{__name__}:ToyBackend"
    assert resolve_backend_name("auto") == "toy"


def test_auto_falls_back_to_the_cpu_with_one_warning(entry_points: dict[str, str]) -> None:
    entry_points["toy"] = f"{__name__}:_Unusable"
    with pytest.warns(RuntimeWarning, match="runs on the CPU"):
        assert resolve_backend_name("auto") == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend_name("auto") == "cpu"  # warned once per process


def test_an_unknown_backend_names_the_choices(entry_points: dict[str, str]) -> None:
    entry_points["toy"] = f"{__name__}:ToyBackend"
    with pytest.raises(BackendError, match="use one of cpu, gpu, toy, auto"):
        resolve_backend_name("tpu")


def test_a_missing_gpu_backend_says_which_distribution_to_install(
    entry_points: dict[str, str],
) -> None:
    with pytest.raises(BackendError, match="pip install asgrad-gpu"):
        get_backend("gpu")
    with pytest.raises(BackendError, match="no backend called 'tpu'"):
        get_backend("tpu")


def test_a_broken_entry_point_is_a_backend_error(entry_points: dict[str, str]) -> None:
    entry_points["broken"] = "asgrad_no_such_module:Backend"
    with pytest.raises(BackendError, match="failed to import"):
        get_backend("broken")


def test_a_registered_backend_wins_over_an_entry_point(entry_points: dict[str, str]) -> None:
    entry_points["toy"] = "asgrad_no_such_module:Backend"
    backends.register_backend("toy", ToyBackend)
    assert isinstance(get_backend("toy"), ToyBackend)
