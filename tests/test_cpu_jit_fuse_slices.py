"""A sum of slice gradients as one assembled array (asgrad.tensor.cpu.jit.fuse_slices)
against the numpy reference path.

The gradient of a value sliced into parts (the query, key and value of one projection)
is a sum of ``scatter_slice`` s; on the compiled path it becomes one ``_assemble``
line, and training gives the numpy path's numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn
from asgrad.tensor import Graph, Tensor
from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.jit.fuse_slices import assemble

pytestmark = pytest.mark.usefixtures("line_path")


class _Parts(nn.Module):
    """One projection sliced along its last axis into ``widths`` parts (a head layout
    for the first: reshaped and transposed), each part used on its own."""

    def __init__(self, d: int, widths: tuple[int, ...], gap: int) -> None:
        super().__init__()
        self.widths, self.gap = widths, gap
        self.proj = nn.Linear(d, sum(widths) + gap)

    def forward(self, x: Tensor) -> Tensor:
        h = self.proj(x)
        b, t, _ = h.shape
        start, total = 0, None
        value: Tensor
        for i, w in enumerate(self.widths):
            part = h[:, :, start : start + w]
            start += w + (self.gap if i == 0 else 0)
            if i == 0:  # heads: (b, 2, t, w / 2), back to (b, t, w)
                part = part.reshape(b, t, 2, w // 2).transpose(0, 2, 1, 3)
                part = (part * 2.0).transpose(0, 2, 1, 3).reshape(b, t, w)
            value = (part * part).sum() if i % 2 else part.tanh().sum()
            total = value if total is None else total + value
        assert total is not None
        return total


def _train(flag: bool, widths: tuple[int, ...], gap: int) -> tuple[list[float], list[Any], str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(0)
    model = _Parts(6, widths, gap)
    model.initialize(0)
    g = Graph()
    x = g.input("x", (2, 5, 6))
    program = nn.SGD(model.parameters(), lr=0.05).compile(model(x) * 0.01, backend="cpu")
    feeds = {"x": rng.standard_normal((2, 5, 6)).astype(np.float32)}
    losses = [float(program(feeds)[0]) for _ in range(4)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, [p.value.copy() for p in model.parameters()], source


@pytest.mark.parametrize(("widths", "gap"), [((4, 4, 4), 0), ((4, 2, 6), 0), ((4, 4), 3)])
def test_slice_gradients_are_assembled_and_train_as_the_numpy_path(
    widths: tuple[int, ...], gap: int
) -> None:
    on = _train(True, widths, gap)
    off = _train(False, widths, gap)
    assert on[2].count("= _assemble(") == 1
    assert f"covers={not gap}" in on[2]
    assert "_assemble" not in off[2]
    np.testing.assert_allclose(on[0], off[0], rtol=1e-6)
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_overlapping_slices_keep_their_lines() -> None:
    class Overlap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(6, 8)

        def forward(self, x: Tensor) -> Tensor:
            h = self.proj(x)
            out: Tensor = h[:, :, 0:5].tanh().sum() + (h[:, :, 3:8] * h[:, :, 3:8]).sum()
            return out

    jit.set_enabled(True)
    model = Overlap()
    model.initialize(0)
    g = Graph()
    x = g.input("x", (2, 5, 6))
    program = nn.SGD(model.parameters(), lr=0.05).compile(model(x), backend="cpu")
    feeds = {"x": np.ones((2, 5, 6), np.float32)}
    program(feeds)
    executable: Any = program.executable  # a CPUExecutable: its generated function
    assert "_assemble" not in executable.function(feeds).source


def test_assemble_zeroes_what_no_part_covers_and_writes_through_a_reshaped_slice() -> None:
    out = np.full((2, 3, 8), np.nan, np.float32)
    heads = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 2, 2)
    tail = np.full((2, 3, 2), -1.0, np.float32)
    index = [(slice(None), slice(None), slice(0, 4)), (slice(None), slice(None), slice(6, 8))]
    got = assemble(
        heads, tail, indices=index, covers=False, shape=out.shape, dtype="float32", out=out
    )
    assert got is out
    np.testing.assert_array_equal(out[:, :, :4], heads.reshape(2, 3, 4))
    np.testing.assert_array_equal(out[:, :, 4:6], 0)
    np.testing.assert_array_equal(out[:, :, 6:], -1.0)


def test_assemble_copies_a_part_whose_slice_cannot_take_its_shape_as_a_view() -> None:
    out = np.empty((2, 3, 8), np.float32)
    part = np.arange(16, dtype=np.float32).reshape(2, 8)  # the slice (2, 2, 4) in C order
    rest = np.ones((2, 1, 8), np.float32)
    index = [(slice(None), slice(0, 2), slice(0, 4)), (slice(None), slice(2, 3))]
    assemble(part, rest, indices=index, covers=False, shape=out.shape, dtype="float32", out=out)
    np.testing.assert_array_equal(out[:, :2, :4], part.reshape(2, 2, 4))
    np.testing.assert_array_equal(out[:, :2, 4:], 0)
    np.testing.assert_array_equal(out[:, 2:], 1)
