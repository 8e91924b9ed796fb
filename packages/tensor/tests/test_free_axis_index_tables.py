"""Ops built on index tables either follow a free axis or refuse it when built.

``pad`` (reflect, replicate, circular), ``tril`` and ``triu`` are built from slices
counted from the ends and from positions counted when the graph runs, so a graph
built at one batch size runs at any other. ``unfold``, per-element
``repeat_interleave`` and ``diagonal`` along a free axis gather with indices for the
declared size: they refuse the free axis when the graph is built, naming the op, the
axis and the line, instead of a result that depends on the size fed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import FreeAxisError, Graph, Tensor, einsum, evaluate, pad
from asgrad.tensor.api.nn_activation import glu

BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
NUMPY_MODE: dict[str, Any] = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("widths", [(1, 1), (2, 0), (0, 3)])
def test_padding_the_batch_axis_follows_the_size_fed(
    mode: str, widths: tuple[int, int], backend: str
) -> None:
    g = Graph()
    y = pad(g.input("x", (8, 3)), (widths, (0, 0)), mode=mode)
    for batch in (4, 8, 11):
        fed = np.arange(3 * batch, dtype=np.float32).reshape(batch, 3)
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        np.testing.assert_array_equal(got, np.pad(fed, (widths, (0, 0)), mode=NUMPY_MODE[mode]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_and_triu_follow_the_size_fed(upper: bool, diagonal: int, backend: str) -> None:
    g = Graph()
    x = g.input("x", (8, 5))
    y = x.triu(diagonal) if upper else x.tril(diagonal)
    for batch in (1, 3, 8, 11):
        fed = np.arange(5 * batch, dtype=np.float32).reshape(batch, 5) + 1
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        want = np.triu(fed, diagonal) if upper else np.tril(fed, diagonal)
        np.testing.assert_array_equal(got, want)


REFUSED: list[tuple[str, Callable[[Tensor], Tensor]]] = [
    ("repeat_interleave", lambda x: x.repeat_interleave([1, 2], 0)),
    ("diagonal", lambda x: x.diagonal(0, 0, 1)),
]


@pytest.mark.parametrize(
    ("op", "build"), REFUSED, ids=[f"{op}-{i}" for i, (op, _) in enumerate(REFUSED)]
)
def test_an_op_that_cannot_follow_a_free_axis_refuses_it_when_built(
    op: str, build: Callable[[Tensor], Tensor]
) -> None:
    g = Graph()
    x = g.input("x", (2, 3), free=(0, 1))
    with pytest.raises(
        FreeAxisError, match=rf"^{op}: axis 0 .*free(.|\n)*test_free_axis_index_tables"
    ):
        build(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("op", "build"), REFUSED, ids=[f"{op}-{i}" for i, (op, _) in enumerate(REFUSED)]
)
def test_the_same_op_on_a_fixed_axis_runs(
    op: str, build: Callable[[Tensor], Tensor], backend: str
) -> None:
    g = Graph()
    y = build(g.input("x", (2, 3), free=()))
    fed = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = evaluate([y], {"x": fed}, backend=backend)
    assert got.shape == y.shape


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("offset", [-2, 0, 1, 4])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0)])
def test_a_diagonal_with_one_free_axis_follows_the_size_fed(
    offset: int, axes: tuple[int, int], backend: str
) -> None:
    g = Graph()
    y = g.input("x", (8, 3)).diagonal(offset, *axes)
    for batch in (1, 3, 8, 11):
        fed = np.arange(3 * batch, dtype=np.float32).reshape(batch, 3) + 1
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        np.testing.assert_array_equal(got, np.diagonal(fed, offset, *axes))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("size", "step"), [(1, 1), (2, 1), (3, 2)])
def test_unfold_along_the_batch_axis_follows_the_size_fed(
    size: int, step: int, backend: str
) -> None:
    g = Graph()
    y = g.input("x", (8, 2)).unfold(0, size, step)
    for batch in (3, 8, 11):
        fed = np.arange(2 * batch, dtype=np.float32).reshape(batch, 2)
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        want = np.lib.stride_tricks.sliding_window_view(fed, size, 0)[::step]
        np.testing.assert_array_equal(got, want)


def test_indexing_another_axis_keeps_the_batch_free() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    fed = np.arange(12, dtype=np.float32).reshape(4, 3)
    (got,) = evaluate([pad(x, ((0, 0), (1, 1)), mode="reflect")], {"x": fed})
    np.testing.assert_array_equal(got, np.pad(fed, ((0, 0), (1, 1)), mode="reflect"))
    (got,) = evaluate([x.unfold(1, 2, 1)], {"x": fed})
    assert got.shape == (4, 2, 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("equation", "declared"),
    [
        ("bi,ij->bj", (8, 3)),
        ("bi,ij->jb", (8, 3)),
        ("kbi,ij->kbj", (2, 8, 3)),
        ("bi,bj->ij", (8, 3)),
    ],
)
def test_einsum_with_a_constant_keeps_the_batch_free(
    equation: str, declared: tuple[int, ...], backend: str
) -> None:
    g = Graph()
    axis = declared.index(8)
    x = g.input("x", declared, free=(axis,))
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    other = x if equation == "bi,bj->ij" else g.constant(w)
    y = einsum(equation, x, other)
    for batch in (1, 3, 11):
        shape = list(declared)
        shape[axis] = batch
        fed = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        want = np.einsum(equation, fed, fed if equation == "bi,bj->ij" else w)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_einsum_refuses_a_free_axis_it_would_broadcast_or_take_a_diagonal_of() -> None:
    g = Graph()
    x = g.input("x", (3, 3), free=(0,))
    with pytest.raises(FreeAxisError, match=r"einsum 'ii->i': label 'i'.*diagonal"):
        einsum("ii->i", x)
    with pytest.raises(FreeAxisError, match="broadcast"):
        einsum("...ij,...jk->...ik", g.input("a", (2, 1, 3, 4)), g.constant(np.ones((5, 4, 2))))


@pytest.mark.parametrize(
    "build",
    [lambda x: x.roll(1, 0), lambda x: x.roll(2), lambda x: glu(x, 0)],
    ids=["roll axis 0", "roll flat", "glu"],
)
def test_ops_that_wrap_or_halve_the_declared_size_refuse_a_free_axis(
    build: Callable[[Tensor], Tensor],
) -> None:
    with pytest.raises(FreeAxisError, match="free"):
        build(Graph().input("x", (4, 3)))


@pytest.mark.parametrize(
    ("declared", "axis", "target", "at_3"),
    [
        ((5, 2, 64), 1, (5, 16, 8), (5, 24, 8)),  # (L, B, E) -> (L, B * heads, E / heads)
        ((8, 3), 0, (8, 3, 1), (3, 3, 1)),
        ((2, 8, 6), 1, (2, 48), (2, 18)),
    ],
)
def test_a_reshape_written_with_declared_sizes_follows_the_free_axis(
    declared: tuple[int, ...], axis: int, target: tuple[int, ...], at_3: tuple[int, ...]
) -> None:
    g = Graph()
    y = g.input("x", declared, free=(axis,)).reshape(target)
    shape = list(declared)
    shape[axis] = 3
    fed = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    (got,) = evaluate([y], {"x": fed})
    np.testing.assert_array_equal(got, fed.reshape(at_3))


def test_a_reshape_that_splits_the_free_axis_keeps_its_declared_sizes() -> None:
    g = Graph()
    y = g.input("x", (8, 3)).reshape(4, 6)
    assert y.node.attrs["shape"] == (4, 6)
