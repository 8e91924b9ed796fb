"""Gradients of the shape, index, padding and einsum front doors
against PyTorch's (where its rules are the point: ties of ``amax``, zeros of ``prod``),
and against float64 central differences through the front doors."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Graph, Tensor, einsum, evaluate, linalg, pad, scan

RNG = np.random.default_rng(131)


@pytest.fixture(autouse=True)
def _same_inputs_alone_or_together() -> None:
    """Each test draws from a fresh RNG: its inputs match PyTorch's saved answers whichever
    tests run with it, and in whatever order."""
    global RNG
    RNG = np.random.default_rng(131)


def _asgrad_grads(
    build: Callable[..., Tensor], arrays: list[np.ndarray], wrt: list[int]
) -> list[Any]:
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name, free=()) for i, a in enumerate(arrays)]
    out = build(*xs)
    w = g.constant(np.linspace(0.5, 1.5, out.size).reshape(out.shape), out.dtype)
    grads = grad((out * w).sum(), [xs[i] for i in wrt])
    return evaluate(grads, {f"x{i}": a for i, a in enumerate(arrays)})


def _torch_grads(torch: Any, build: Callable[..., Any], arrays: list[Any], wrt: list[int]) -> Any:
    ts = [torch.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = build(torch, *ts)
    w = torch.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
    (out * w).sum().backward()
    return [ts[i].grad.numpy() for i in wrt]


def _compare(
    torch_reference: Callable[..., Any],
    mine: Callable[..., Tensor],
    theirs: Callable[..., Any],
    arrays: list[np.ndarray],
    wrt: list[int],
) -> None:
    """``theirs(torch, *tensors)``: PyTorch's function, its gradients from the fixture."""
    got = _asgrad_grads(mine, arrays, wrt)
    want = torch_reference(lambda torch, *a: _torch_grads(torch, theirs, list(a), wrt), *arrays)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_match_pytorch_with_ties_and_zeros(
    reduce: str, include_self: bool, torch_reference: Callable[..., Any]
) -> None:
    x = np.array([[1.0, 2.0, 0.0], [3.0, 3.0, 5.0], [0.5, -1.0, 2.0], [4.0, 4.0, 4.0]])
    if not include_self and reduce in ("amax", "amin"):
        x += 0.125  # no tie with x, which does not take part: see the last test
    idx = np.array([[0, 0, 1], [1, 0, 1], [0, 2, 1], [1, 2, 0]])
    src = np.array([[3.0, 2.0, 5.0], [3.0, 0.0, 5.0], [1.0, 0.0, 0.0], [1.0, 2.0, 4.0]])

    def mine(a: Tensor, i: Tensor, s: Tensor) -> Tensor:
        return a.scatter_reduce(0, i, s, reduce, include_self)

    def theirs(torch: Any, a: Any, i: Any, s: Any) -> Any:
        return a.scatter_reduce(0, i, s, reduce, include_self=include_self)

    _compare(torch_reference, mine, theirs, [x, idx, src], [0, 2])


def test_gather_scatter_add_and_indexing_gradients_match_pytorch(
    torch_reference: Callable[..., Any],
) -> None:
    x = RNG.standard_normal((4, 5))
    idx = RNG.integers(0, 4, (6, 5))
    small = RNG.integers(0, 5, (3, 2))
    src = RNG.standard_normal((6, 5))
    ref = torch_reference
    _compare(ref, lambda a, i: a.gather(0, i), lambda _, a, i: a.gather(0, i), [x, idx], [0])
    _compare(ref, lambda a, i: a.gather(1, i), lambda _, a, i: a.gather(1, i), [x, small], [0])
    _compare(
        ref,
        lambda a, i, s: a.scatter_add(0, i, s),
        lambda _, a, i, s: a.scatter_add(0, i, s),
        [x, idx, src],
        [0, 2],
    )
    rows, cols = np.array([3, 0, 3]), np.array([1, 4, 1])
    _compare(ref, lambda a: a[rows, cols], lambda _, a: a[rows, cols], [x], [0])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradients_match_pytorch(mode: str, torch_reference: Callable[..., Any]) -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    widths = (2, 1, -1, 3)
    kwargs = {"value": 0.25} if mode == "constant" else {}
    _compare(
        torch_reference,
        lambda a: pad(a, widths, mode=mode, value=0.25),
        lambda torch, a: torch.nn.functional.pad(a, widths, mode=mode, **kwargs),
        [x],
        [0],
    )


def test_einsum_gradients_match_pytorch(torch_reference: Callable[..., Any]) -> None:
    a, b, c = RNG.standard_normal((2, 3, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    for eq in ("bii,ij,j->b", "bij,jk->bk", "...ij,jk->...ik", "bii->bi"):
        ops = [a, b, c][: eq.split("->")[0].count(",") + 1]
        _compare(
            torch_reference,
            lambda *t, e=eq: einsum(e, *t),
            lambda torch, *t, e=eq: torch.einsum(e, *t),
            ops,
            list(range(len(ops))),
        )


@pytest.mark.parametrize(
    ("name", "build", "shapes"),
    [
        ("flip", lambda x: x.flip(0, 2), [(3, 2, 4)]),
        ("roll", lambda x: x.roll((2, -1), (0, 1)), [(3, 4)]),
        ("tril", lambda x: x.tril(1), [(2, 3, 4)]),
        ("diagonal", lambda x: x.diagonal(1, 0, 2), [(3, 2, 4)]),
        ("repeat", lambda x: x.repeat(2, 1, 3), [(2, 3)]),
        ("repeat_interleave", lambda x: x.repeat_interleave([2, 0, 1], 1), [(2, 3)]),
        ("unfold", lambda x: x.unfold(1, 3, 2), [(2, 7)]),
        ("cross", lambda a, b: linalg.cross(a, b, 0), [(3, 2), (3, 2)]),
        ("norm p", lambda x: linalg.vector_norm(x, 3.0, -1), [(2, 5)]),
        ("norm inf", lambda x: linalg.matrix_norm(x, float("inf")), [(2, 3, 4)]),
        ("scatter", lambda x, s: x.scatter(1, x.graph.constant([[2, 0]]), s), [(1, 4), (1, 2)]),
    ],
)
def test_gradients_through_front_doors_match_differences(
    name: str, build: Callable[..., Tensor], shapes: list[tuple[int, ...]]
) -> None:
    gradient_check(build, [RNG.standard_normal(s) for s in shapes])


def test_amax_without_self_shares_the_gradient_among_the_values_that_take_part() -> None:
    # PyTorch also counts x[i] as a tie when it equals the result though include_self
    # is False, and then drops its share: the shares sum to less than the gradient.
    # asgrad splits the gradient among the entries of src that reach the maximum.
    g = Graph()
    x = g.input("x", (2,), "float64")
    src = g.input("s", (3,), "float64")
    idx = g.constant([0, 0, 1])
    out = x.scatter_reduce(0, idx, src, "amax", include_self=False)
    dx, ds = grad(out.sum(), [x, src])
    got = evaluate([dx, ds], {"x": np.array([3.0, 0.0]), "s": np.array([3.0, 3.0, 1.0])})
    np.testing.assert_array_equal(got[0], [0.0, 0.0])
    np.testing.assert_array_equal(got[1], [0.5, 0.5, 1.0])


@pytest.mark.parametrize("order", [2.0, 3.0])
def test_the_norm_of_zeros_has_gradient_zero_as_pytorch(
    order: float, torch_reference: Callable[..., Any]
) -> None:
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    _compare(
        torch_reference,
        lambda a: linalg.vector_norm(a, order, axis=1),
        lambda torch, a: torch.linalg.vector_norm(a, order, dim=1),
        [x],
        [0],
    )


def _gates(x: Tensor, bounds: list[int]) -> Tensor:
    pieces = [x[:, a:b] for a, b in itertools.pairwise(bounds)]
    total = pieces[0].sigmoid().sum()
    for i, p in enumerate(pieces[1:]):
        total = total + (p.tanh() * float(i + 2)).sum()
    return total


def _cell(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    v = h * 0.5 + x
    new = v.tanh() * _gates(v, [0, 2, 6, 7, 8])
    return new, new


def test_gradients_of_slices_that_tile_a_value_in_a_loop_body_are_one_concat() -> None:
    g = Graph()
    h0, xs = g.input("h", (3, 8), "float64"), g.input("xs", (4, 3, 8), "float64")
    _, ys = scan(_cell, h0, xs)
    grad((ys * ys).sum(), [h0, xs])
    (backward,) = [n for n in g.nodes if n.op == "scan" and not n.attrs["save"]]
    assert "concat" in {n.op for n in backward.attrs["loop"].graph.nodes}
    # Outside a loop body the scatters and adds stay (the GPU plan fuses them).
    x = Graph().input("x", (3, 8), "float64")
    (dx,) = grad(_gates(x, [0, 2, 6, 7, 8]), [x])
    assert dx.node.op == "add"

    def build(h: Tensor, steps: Tensor) -> Tensor:
        return scan(_cell, h, steps)[1]

    gradient_check(build, [np.linspace(-1, 1, 24).reshape(3, 8), RNG.standard_normal((4, 3, 8))])
    gradient_check(lambda v: _gates(v, [0, 2, 6]), [np.linspace(-2, 2, 24).reshape(3, 8)])
