"""Fused line groups (asgrad.tensor.cpu.jit.fuse) against the numpy reference path.

Adam's three ops per parameter become one Numba pass on the compiled path: the
generated source calls the fused kernel, and training gives the numpy path's numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn
from asgrad.tensor import Graph
from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.jit import fuse


@pytest.fixture(autouse=True)
def _switch_back(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each parameter's Adam ops as lines or one fused line (no segments, which would
    take the small ones), the environment's switch again after each test (the tests
    set theirs)."""
    from asgrad.tensor.cpu.jit import fuse_segments

    monkeypatch.setattr(fuse_segments, "SMALL_ELEMENTS", 0)
    yield
    jit.set_enabled(None)


def _train(flag: bool, optimizer: str, hidden: int) -> tuple[list[float], list[np.ndarray], str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (32, 64)), g.input("y", (32,), "int64")
    loss = nn.cross_entropy(model(x), y)
    params = list(model.parameters())
    opt = nn.Adam(params, lr=1e-2) if optimizer == "adam" else nn.AdamW(params, lr=1e-2)
    program = opt.compile(loss, backend="cpu")
    feeds = {
        "x": rng.standard_normal((32, 64)).astype(np.float32),
        "y": rng.integers(0, 10, (32,)).astype(np.int64),
    }
    losses = [float(program(feeds)[0]) for _ in range(8)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, [p.value.copy() for p in params], source


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_fused_adam_trains_as_the_numpy_path(optimizer: str) -> None:
    on = _train(True, optimizer, 48)
    off = _train(False, optimizer, 48)
    # 64 x 48 and 48 x 10 weights are fused (>= FUSE_MIN_ELEMENTS), the biases are not
    assert on[2].count("= _fused") == 1 + (fuse.FUSE_MIN_ELEMENTS <= 48 * 10)
    assert "_fused" not in off[2]
    assert on[2].count("= _empty(") == 2 * on[2].count("= _fused")
    np.testing.assert_allclose(on[0], off[0], rtol=1e-6)
    # The fused update is the numpy kernels' arithmetic, but the compiled log-softmax
    # agrees with numpy's to its tolerance only, and Adam's step m / sqrt(v) magnifies
    # an ulp of a tiny gradient: parameters agree to a fraction of one step (lr 1e-2).
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert on[0][-1] < on[0][0]


def test_small_parameters_are_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 10**9)
    _, _, source = _train(True, "adam", 48)
    assert "_fused" not in source


def test_every_parameter_is_fused_above_a_low_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 1)
    on = _train(True, "adamw", 24)
    off = _train(False, "adamw", 24)
    assert on[2].count("= _fused") == 4
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
