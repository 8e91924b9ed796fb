"""A batched matmul summed over its batch axes (a weight's gradient through a 3-D
input, ``sum_b x_b^T @ dy_b``) runs as one 2-D matmul with the batch folded into K,
where the operands' strides allow it, and as a batched matmul and a reduction where
they do not; both match numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan, fusion
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile

pytestmark = pytest.mark.gpu

Build = Callable[[Tensor, Tensor], Tensor]
CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], Build, bool]] = [
    # x^T @ dy summed to the weight's shape (sum_to_like): folds
    ("weight-grad", (4, 6, 5), (4, 6, 3), lambda x, d: (x.swapaxes(-1, -2) @ d).sum(axis=0), True),
    (
        "two-batch-axes",
        (2, 3, 6, 5),
        (2, 3, 6, 3),
        lambda x, d: (x.swapaxes(-1, -2) @ d).sum(axis=(0, 1)),
        True,
    ),
    (
        "keepdims",
        (4, 6, 5),
        (4, 6, 3),
        lambda x, d: (x.swapaxes(-1, -2) @ d).sum(axis=0, keepdims=True),
        True,
    ),
    # a contiguous left operand is not batch-major over K: batched matmul, then a sum
    ("no-fold", (4, 5, 6), (4, 6, 3), lambda x, d: (x @ d).sum(axis=0), False),
    # summed over a non-batch axis: not this pattern at all
    ("rows", (4, 6, 5), (4, 6, 3), lambda x, d: (x.swapaxes(-1, -2) @ d).sum(axis=1), False),
]


@pytest.mark.parametrize(("label", "xs", "ds", "build", "folds"), CASES, ids=[c[0] for c in CASES])
def test_batch_summed_matmul(
    device: Device, label: str, xs: tuple[int, ...], ds: tuple[int, ...], build: Build, folds: bool
) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    d = rng.standard_normal(ds).astype(np.float32)
    g = Graph()
    out = build(g.input("x", xs, free=()), g.input("d", ds, free=()))
    expected = build_numpy(label, x, d)
    program = compile([out], backend="gpu")
    (got,) = program({"x": x, "d": d})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    kinds = count_kinds(build_plan(program.executable.schedule, {"x": x, "d": d}, device).commands)
    assert kinds["matmul"] == 1
    reductions = kinds["column reduction"] + kinds["reduction"]
    assert (reductions == 0) == folds, kinds


def build_numpy(label: str, x: np.ndarray, d: np.ndarray) -> np.ndarray:
    xt = np.swapaxes(x, -1, -2)
    if label == "weight-grad":
        return (xt @ d).sum(axis=0)
    if label == "two-batch-axes":
        return (xt @ d).sum(axis=(0, 1))
    if label == "keepdims":
        return (xt @ d).sum(axis=0, keepdims=True)
    if label == "no-fold":
        return (x @ d).sum(axis=0)
    return (xt @ d).sum(axis=1)


def test_head_transposes_are_strides_of_the_matmuls(device: Device) -> None:
    """Attention's head split (B, T, h, d) -> (B, h, T, d), read by two matmuls and
    by a transpose of it that a matmul reads, costs no copy."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    y = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    g = Graph()
    q = g.input("x", x.shape, free=()).transpose(0, 2, 1, 3)
    k = g.input("y", y.shape, free=()).transpose(0, 2, 1, 3)
    scores = q @ k.swapaxes(-1, -2)
    out = scores @ q + (k.swapaxes(-1, -2) @ q).sum()
    program = compile([out], backend="gpu")
    (got,) = program({"x": x, "y": y})
    qn, kn = x.transpose(0, 2, 1, 3), y.transpose(0, 2, 1, 3)
    sn = qn @ np.swapaxes(kn, -1, -2)
    expected = sn @ qn + (np.swapaxes(kn, -1, -2) @ qn).sum()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
    kinds = count_kinds(build_plan(program.executable.schedule, {"x": x, "y": y}, device).commands)
    assert kinds["view copy"] == 0, kinds
    assert kinds["matmul"] == 3


def test_a_deep_product_with_few_tiles_stays_batched(device: Device, monkeypatch: Any) -> None:
    """Above FOLD_MAX_WORK, a fold that would leave most of a large GPU idle (fewer
    than FOLD_MIN_TILES output tiles walking the whole folded K) is not made."""
    monkeypatch.setattr(fusion, "FOLD_MAX_WORK", 0)
    label, xs, ds, build, _ = CASES[0]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    d = rng.standard_normal(ds).astype(np.float32)
    g = Graph()
    out = build(g.input("x", xs, free=()), g.input("d", ds, free=()))
    program = compile([out], backend="gpu")
    (got,) = program({"x": x, "d": d})
    np.testing.assert_allclose(got, build_numpy(label, x, d), rtol=1e-5, atol=1e-5)
    kinds = count_kinds(build_plan(program.executable.schedule, {"x": x, "d": d}, device).commands)
    assert kinds["column reduction"] + kinds["reduction"] >= 1, kinds
