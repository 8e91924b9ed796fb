"""The measured choice between kernels (`asgrad.tensor.cpu.jit.route`).

A route runs every kernel while it measures (the reference's result returned), then
the fastest; a close race keeps the preferred kernel; a decision is kept in the cache
folder's routes file, per machine, and a later route reads it instead of measuring;
``ASGRAD_CPU_ROUTE`` forces a kernel or a new measurement. The kernels here are
Python loops of known lengths, so no Numba is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from asgrad.tensor.cpu.jit import route as rt
from asgrad.tensor.cpu.jit.route import Route, decide
from asgrad.tensor.errors import ArgumentError

Kernels = list[tuple[str, Callable[[np.ndarray | None], np.ndarray]]]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder, and no ASGRAD_CPU_ROUTE."""
    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(rt.ENV, raising=False)
    return tmp_path


def _kernels(calls: list[str], loops: dict[str, int]) -> Kernels:
    def make(name: str, n: int) -> Callable[[np.ndarray | None], np.ndarray]:
        def run(out: np.ndarray | None) -> np.ndarray:
            calls.append(name)
            total = 0
            for i in range(n):
                total += i
            return np.full(2, float(n))

        return run

    return [(name, make(name, n)) for name, n in loops.items()]


def _spare() -> np.ndarray:
    return np.empty(2)


LOOPS = {"numpy": 20000, "parallel": 0, "serial": 200000}


def test_a_route_measures_every_kernel_then_runs_the_fastest(cache: Path) -> None:
    route = Route("test", persist=False)
    calls: list[str] = []
    kernels = _kernels(calls, LOOPS)
    for _ in range(rt.TRIALS):
        assert route.run("key", kernels, None, _spare)[0] == 20000  # the reference's
    # each kernel: once in the warm-up, then ROUNDS times in each timed call
    for name in LOOPS:
        assert calls.count(name) == 1 + (rt.TRIALS - 1) * rt.ROUNDS + (name == "numpy") * (
            rt.TRIALS - 1
        )
    assert route.describe() == {"key": "parallel"}
    calls.clear()
    assert route.run("key", kernels, None, _spare)[0] == 0
    assert calls == ["parallel"]
    route.force = "serial"
    assert route.run("key", kernels, None, _spare)[0] == 200000
    assert not (cache / rt.FILE).exists()  # persist=False: no file


def test_a_close_race_keeps_the_preferred_kernel() -> None:
    assert decide({"parallel": 1.05, "serial": 1.0}) == "parallel"
    assert decide({"parallel": 1.2, "serial": 1.0}) == "serial"
    assert decide({"parallel": 1.0, "serial": 2.0, "numpy": 0.1}) == "numpy"
    assert decide({"numpy": 1.0, "fast": 0.95}) == "numpy"


def test_one_lucky_fast_run_does_not_win_the_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """The median of the timed runs decides: "parallel" is fast once and slow in every
    other run, so "serial" (steady) keeps the key."""
    clock = [0.0]
    # (the warm-up and each call's untimed first run take two before the timed ones)
    costs = {"serial": iter([1.0] * 20), "parallel": iter([3.0] * 3 + [0.1] + [3.0] * 16)}

    def kernel(name: str) -> Callable[[np.ndarray | None], np.ndarray]:
        def run(out: np.ndarray | None) -> np.ndarray:
            clock[0] += next(costs[name])
            return np.zeros(2)

        return run

    monkeypatch.setattr(rt.time, "perf_counter", lambda: clock[0])
    route = Route("test", persist=False)
    kernels = [(name, kernel(name)) for name in ("parallel", "serial")]
    for _ in range(rt.TRIALS):
        route.run("key", kernels, None, _spare)
    assert route.describe() == {"key": "serial"}


def test_a_decision_on_disk_is_reused_without_measuring(cache: Path) -> None:
    calls: list[str] = []
    kernels = _kernels(calls, LOOPS)
    first = Route("test")
    for _ in range(rt.TRIALS):
        first.run("key", kernels, None, _spare)
    assert first.measured == {"key"}
    stored = json.loads((cache / rt.FILE).read_text())
    assert stored == {f"{rt.machine()}|test": {repr("key"): "parallel"}}
    calls.clear()
    later = Route("test")  # as in a later process
    assert later.run("key", kernels, None, _spare)[0] == 0
    assert calls == ["parallel"]
    assert later.describe() == {"key": "parallel"}
    assert not later.measured


def test_a_decision_for_another_kernel_than_the_threads_is_measured_again(cache: Path) -> None:
    """A decision made where one thread won (a moment of load) is not kept by a later
    process: it measures again and writes what it finds; the threads' decision is kept."""
    (cache / rt.FILE).write_text(json.dumps({f"{rt.machine()}|test": {repr("key"): "serial"}}))
    calls: list[str] = []
    kernels = _kernels(calls, LOOPS)  # "parallel" is the fastest here
    later = Route("test")  # as in a later process
    assert later.stored("key") is None
    for _ in range(rt.TRIALS):
        assert later.run("key", kernels, None, _spare)[0] == 20000  # the reference's
    assert set(calls) == set(LOOPS)  # measured
    assert later.measured == {"key"}
    assert later.describe() == {"key": "parallel"}
    stored = json.loads((cache / rt.FILE).read_text())
    assert stored[f"{rt.machine()}|test"][repr("key")] == "parallel"  # written anew
    calls.clear()
    again = Route("test")
    assert again.stored("key") == "parallel"
    assert again.run("key", kernels, None, _spare)[0] == 0
    assert calls == ["parallel"]


def test_a_decision_of_another_machine_or_route_is_not_used(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cache / rt.FILE).write_text(
        json.dumps({f"{rt.machine()}|other": {repr("key"): "serial"}, "elsewhere|test": {}})
    )
    calls: list[str] = []
    route = Route("test")
    route.run("key", _kernels(calls, LOOPS), None, _spare)
    assert set(calls) == set(LOOPS)  # measuring
    monkeypatch.setattr(rt, "machine", lambda: "elsewhere")
    calls.clear()
    Route("other").run("key", _kernels(calls, LOOPS), None, _spare)
    assert set(calls) == set(LOOPS)


def test_the_environment_forces_a_kernel_or_a_new_measurement(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cache / rt.FILE).write_text(json.dumps({f"{rt.machine()}|test": {repr("key"): "parallel"}}))
    calls: list[str] = []
    # "serial" the fastest: a new measurement overturns the file's "parallel"
    kernels = _kernels(calls, {"numpy": 20000, "parallel": 200000, "serial": 0})
    monkeypatch.setenv(rt.ENV, "numpy")
    assert Route("test").run("key", kernels, None, _spare)[0] == 20000
    assert calls == ["numpy"]
    monkeypatch.setenv(rt.ENV, "measure")
    calls.clear()
    route = Route("test")
    for _ in range(rt.TRIALS):
        route.run("key", kernels, None, _spare)
    assert route.describe() == {"key": "serial"}
    stored = json.loads((cache / rt.FILE).read_text())
    assert stored[f"{rt.machine()}|test"][repr("key")] == "serial"  # written anew


@pytest.mark.parametrize("value", ["fastest", "1"])
def test_an_unknown_route_setting_is_an_argument_error(
    cache: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(rt.ENV, value)
    with pytest.raises(ArgumentError, match="ASGRAD_CPU_ROUTE"):
        Route("test").run("key", _kernels([], LOOPS), None, _spare)


def test_forcing_a_kernel_the_route_lacks_is_an_argument_error(cache: Path) -> None:
    route = Route("test", persist=False)
    route.force = "gpu"
    with pytest.raises(ArgumentError, match="no kernel 'gpu'"):
        route.run("key", _kernels([], LOOPS), None, _spare)


def test_an_unreadable_routes_file_is_measured_over(cache: Path) -> None:
    (cache / rt.FILE).write_text("{not json")
    calls: list[str] = []
    route = Route("test")
    for _ in range(rt.TRIALS):
        route.run("key", _kernels(calls, LOOPS), None, _spare)
    assert route.describe() == {"key": "parallel"}
    assert json.loads((cache / rt.FILE).read_text()) == {
        f"{rt.machine()}|test": {repr("key"): "parallel"}
    }
