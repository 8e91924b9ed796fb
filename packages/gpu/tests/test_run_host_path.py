"""The host side of a compiled GPU run: a loop fed the same kinds of arrays finds its
plan without a new key, and skips the variables' sync while the store's generation
says they are all on the device; anything that takes a variable off the device
(a new value, a read) makes the next run sync it again.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu, variable_store
from asgrad.tensor import Graph, Variable, compile

pytestmark = pytest.mark.gpu


def _step(start: np.ndarray) -> tuple[Variable, object]:
    """``out = sum(x * w)`` and the update ``w += x.sum(0)``."""
    w = Variable("w", start.copy())
    g = Graph()
    x = g.input("x", (2, 4), free=(0,))
    p = g.parameter("w", variable=w)
    program = compile([(x * p).sum()], [(w, p + x.sum(axis=0))], backend="gpu")
    return w, program


X = np.arange(8, dtype=np.float32).reshape(2, 4)
START = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def test_steps_fed_the_same_device_array_upload_nothing(device: Device) -> None:
    w, program = _step(START)
    xs = to_gpu(X, device)
    program.launch({"x": xs})  # type: ignore[attr-defined]
    uploads = device.counter.uploads
    for _ in range(3):
        program.launch({"x": xs})  # type: ignore[attr-defined]
    assert device.counter.uploads == uploads
    np.testing.assert_allclose(w.value, START + 4 * X.sum(axis=0))


def test_a_value_set_between_runs_is_uploaded_before_the_next(device: Device) -> None:
    w, program = _step(START)
    program({"x": X})  # type: ignore[operator]
    program({"x": X})  # type: ignore[operator]
    w.value = np.zeros(4, np.float32)
    (out,) = program({"x": X})  # type: ignore[operator]
    assert float(out) == 0.0  # sum(x * 0), not the device's old w
    np.testing.assert_allclose(w.value, X.sum(axis=0))


def test_a_value_read_between_runs_stays_current_after_the_next(device: Device) -> None:
    w, program = _step(START)
    store = variable_store(device)
    program({"x": X})  # type: ignore[operator]
    generation = store.generation
    np.testing.assert_allclose(w.value, START + X.sum(axis=0))  # a fetch: the host holds it
    assert store.generation > generation
    program({"x": X})  # type: ignore[operator]
    assert w.holder is store  # the update marked it again, so reading fetches it
    np.testing.assert_allclose(w.value, START + 2 * X.sum(axis=0))


def test_runs_alternating_batch_sizes_use_each_its_own_plan(device: Device) -> None:
    w, program = _step(START)
    small, large = X[:1], np.ones((3, 4), np.float32)
    total = START.copy()
    for x in (small, large, small, small, large):
        (out,) = program({"x": x})  # type: ignore[operator]
        np.testing.assert_allclose(float(out), float((x * total).sum()), rtol=1e-6)
        total = total + x.sum(axis=0)
    np.testing.assert_allclose(w.value, total)
