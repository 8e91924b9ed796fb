"""Ops built on index tables follow a free axis, or refuse it when built.

``pad`` (reflect, replicate, circular), ``tril`` and ``triu`` are built from slices
counted from the ends and from positions counted when the graph runs, so a graph
built at one batch size runs at any other. ``roll``, ``glu``, constant padding, a
diagonal of two free axes and an einsum diagonal are built for the declared sizes
and traced again at the sizes fed (`asgrad.tensor.ir.retrace`). Per-element
``repeat_interleave`` and ``cross`` fit no other size: they refuse the free axis when
the graph is built, naming the op, the axis and the line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import FeedError, FreeAxisError, Graph, Tensor, einsum, evaluate, pad
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
    ("repeat_interleave", lambda x: x.repeat_interleave([1, 0, 2], 0)),
    ("cross", lambda x: x.graph.apply("cross", (x, x), {"axis": 0})),
]


@pytest.mark.parametrize(
    ("op", "build"), REFUSED, ids=[f"{op}-{i}" for i, (op, _) in enumerate(REFUSED)]
)
def test_an_op_that_cannot_follow_a_free_axis_refuses_it_when_built(
    op: str, build: Callable[[Tensor], Tensor]
) -> None:
    g = Graph()
    x = g.input("x", (3, 3), free=(0, 1))
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
    y = build(g.input("x", (3, 3), free=()))
    fed = np.arange(9, dtype=np.float32).reshape(3, 3)
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_einsum_diagonal_or_broadcast_of_a_free_axis_follows_the_size_fed(
    backend: str,
) -> None:
    g = Graph()
    x = g.input("x", (3, 3), free=(0, 1))
    a = g.input("a", (2, 1, 3, 4), free=(1,))
    w = np.arange(40, dtype=np.float32).reshape(5, 4, 2) / 10
    diag, batched = einsum("ii->i", x), einsum("...ij,...jk->...ik", a, g.constant(w))
    for n in (1, 5):
        fx = np.arange(n * n, dtype=np.float32).reshape(n, n)
        fa = np.arange(2 * n * 12, dtype=np.float32).reshape(2, n, 3, 4) / 7
        got = evaluate([diag, batched], {"x": fx, "a": fa}, backend=backend)
        np.testing.assert_array_equal(got[0], np.einsum("ii->i", fx))
        np.testing.assert_allclose(got[1], np.einsum("...ij,...jk->...ik", fa, w), rtol=1e-5)


def _glu(a: np.ndarray) -> np.ndarray:
    if len(a) % 2:
        raise ValueError("glu halves the axis")
    half = len(a) // 2
    out: np.ndarray = a[:half] / (1 + np.exp(-a[half:]))
    return out


WRAPPING: list[tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = [
    (lambda x: x.roll(1, 0), lambda a: np.roll(a, 1, 0)),
    (lambda x: x.roll(2), lambda a: np.roll(a, 2)),
    (lambda x: glu(x, 0), lambda a: _glu(a)),
    (lambda x: x.diagonal(1, 0, 1), lambda a: np.diagonal(a, 1, 0, 1)),
    (
        lambda x: pad(x, ((1, 2), (0, 1)), value=-1.0),
        lambda a: np.pad(a, ((1, 2), (0, 1)), constant_values=-1.0),
    ),
    (lambda x: x.repeat_interleave([2], 0), lambda a: np.repeat(a, 2, 0)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("build", "numpy"),
    WRAPPING,
    ids=["roll axis 0", "roll flat", "glu", "diagonal", "constant pad", "repeat_interleave"],
)
def test_ops_built_for_the_declared_size_are_built_again_at_the_size_fed(
    build: Callable[[Tensor], Tensor], numpy: Callable[[np.ndarray], np.ndarray], backend: str
) -> None:
    g = Graph()
    y = build(g.input("x", (4, 4), free=(0, 1)))
    for n in (4, 1, 2, 6):  # 1: a table built for 4 must not broadcast a single row
        fed = np.arange(n * n, dtype=np.float32).reshape(n, n) / 9
        try:
            want = numpy(fed)
        except ValueError:  # a size the op does not take: an error naming the op
            with pytest.raises(FeedError, match="glu"):
                evaluate([y], {"x": fed}, backend=backend)
            continue
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        assert got.shape == want.shape, n
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_size_the_op_cannot_take_names_the_line_that_made_it() -> None:
    y = glu(Graph().input("x", (4, 3)), 0)
    with pytest.raises(FeedError, match=r"glu \(made at .*test_free_axis_index_tables"):
        evaluate([y], {"x": np.ones((5, 3), np.float32)})


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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch_first", [True, False])
def test_a_reshape_that_splits_a_merged_batch_back_follows_the_size_fed(
    batch_first: bool, backend: str
) -> None:
    g = Graph()
    x = g.input("x", (2, 5, 3))  # (B, T, C), B free
    merged = x.reshape(10, 3) if batch_first else x.transpose((1, 0, 2)).reshape(10, 3)
    y = merged.reshape((2, 5, 3) if batch_first else (5, 2, 3)) * 2.0
    for n in (1, 3, 4):
        fed = np.arange(n * 15, dtype=np.float32).reshape(n, 5, 3)
        (got,) = evaluate([y], {"x": fed}, backend=backend)
        np.testing.assert_array_equal(got, 2 * (fed if batch_first else fed.transpose(1, 0, 2)))


def test_a_reshape_that_splits_the_free_axis_keeps_its_declared_sizes() -> None:
    g = Graph()
    y = g.input("x", (8, 3)).reshape(4, 6)
    assert y.node.attrs["shape"] == (4, 6)
    # (B * T) with B = 2 and T = 4: at B = 3, (3, 4) or (2, 6); either would be a guess
    z = g.input("z", (2, 4, 3)).reshape(8, 3).reshape(2, 4, 3)
    assert z.node.attrs["shape"] == (2, 4, 3)


def test_a_slice_written_from_a_free_axis_into_a_fixed_one_is_refused_when_built() -> None:
    g = Graph()
    x = g.input("x", (4, 5), free=())
    v = g.input("v", (2, 5))  # its batch axis is free: it would fit the slice at 2 only
    with pytest.raises(
        FreeAxisError, match=r"^scatter_slice: axis 0 of its input 0(.|\n)*test_free_axis_index"
    ):
        g.apply("scatter_slice", (v, x), {"index": (slice(1, 3),)})
    fixed = g.input("w", (2, 5), free=())
    y = g.apply("scatter_slice", (fixed, x), {"index": (slice(1, 3),)})
    (got,) = evaluate([y], {"x": np.zeros((4, 5), np.float32), "w": np.ones((2, 5), np.float32)})
    assert got.sum() == 10
