"""The front doors of the shape, index, padding, linalg and creation ops.

Values against numpy and, where PyTorch's semantics are the point (``F.pad``,
``gather``, ``scatter*``, ``repeat``, ``unfold``, ``split``, ``einsum``), against PyTorch
(its answers saved as fixtures, and live where it is installed); typed errors for what cannot work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import (
    ArgumentError,
    ArgumentTypeError,
    DTypeError,
    Graph,
    OutOfRangeError,
    ShapeError,
    Tensor,
    arange,
    einsum,
    evaluate,
    eye,
    full,
    full_like,
    linalg,
    linspace,
    ones,
    ones_like,
    outer,
    pad,
    zeros,
    zeros_like,
)

RNG = np.random.default_rng(13)
Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's saved answers)


def run(build: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """``build(*tensors)`` on inputs holding ``arrays``, evaluated on the CPU."""
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name, free=()) for i, a in enumerate(arrays)]
    out = build(*xs)
    outs = out if isinstance(out, list | tuple) else [out]
    got = evaluate(list(outs), {f"x{i}": a for i, a in enumerate(arrays)})
    return got if isinstance(out, list | tuple) else got[0]


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(autouse=True)
def _same_inputs_alone_or_together() -> None:
    """Each test draws from a fresh RNG: its inputs match PyTorch's saved answers whichever
    tests run with it."""
    global RNG
    RNG = np.random.default_rng(13)


# -- shape --------------------------------------------------------------------------------------
def test_shape_methods_match_numpy() -> None:
    x = f32(2, 3, 4)
    np.testing.assert_array_equal(run(lambda t: t.flip(), x), np.flip(x))
    np.testing.assert_array_equal(run(lambda t: t.flip(0, 2), x), np.flip(x, (0, 2)))
    np.testing.assert_array_equal(run(lambda t: t.roll(-5), x), np.roll(x, -5))
    np.testing.assert_array_equal(
        run(lambda t: t.roll((1, 2), (0, 2)), x), np.roll(x, (1, 2), (0, 2))
    )
    np.testing.assert_array_equal(run(lambda t: t.tril(-1), x), np.tril(x, -1))
    np.testing.assert_array_equal(run(lambda t: t.triu(1), x), np.triu(x, 1))
    np.testing.assert_array_equal(run(lambda t: t.diagonal(0, 1, 2), x), np.diagonal(x, 0, 1, 2))
    np.testing.assert_array_equal(run(lambda t: t.diagonal(-1, 2, 0), x), np.diagonal(x, -1, 2, 0))
    np.testing.assert_array_equal(run(lambda t: t.tile(2), x), np.tile(x, 2))
    np.testing.assert_array_equal(
        run(lambda t: t.repeat_interleave([1, 0, 2], 1), x), np.repeat(x, [1, 0, 2], 1)
    )
    np.testing.assert_array_equal(run(lambda t: t.repeat_interleave(2), x), np.repeat(x, 2))
    np.testing.assert_array_equal(run(lambda t: t.movedim(0, -1), x), np.moveaxis(x, 0, -1))
    np.testing.assert_array_equal(
        run(lambda t: t.movedim((0, 1), (2, 0)), x), np.moveaxis(x, (0, 1), (2, 0))
    )
    np.testing.assert_array_equal(run(lambda t: t.unflatten(2, (2, -1)), x), x.reshape(2, 3, 2, 2))
    np.testing.assert_array_equal(run(lambda t: t.view(-1, 4), x), x.reshape(-1, 4))
    np.testing.assert_array_equal(run(lambda t: t.narrow(2, -3, 2), x), x[:, :, 1:3])
    np.testing.assert_array_equal(run(lambda t: t.mT, x), np.swapaxes(x, -1, -2))
    np.testing.assert_array_equal(run(lambda t: t[0].t(), x), x[0].T)
    pieces = run(lambda t: t.unstack(1), x)
    for i, p in enumerate(pieces):
        np.testing.assert_array_equal(p, x[:, i])


def test_split_and_chunk_follow_pytorch(torch_reference: Reference) -> None:
    x = f32(7, 2)
    for arg in (3, [2, 5], 7, [0, 7]):
        got = run(lambda t, a=arg: t.split(a), x)
        want = torch_reference(lambda torch, x, a=arg: list(torch.from_numpy(x).split(a)), x)
        assert len(got) == len(want)
        for g_, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g_, w)
    for n in (1, 3, 4, 7, 9):
        got = run(lambda t, n=n: t.chunk(n), x)
        want = torch_reference(lambda torch, x, n=n: list(torch.from_numpy(x).chunk(n)), x)
        assert [p.shape for p in got] == [w.shape for w in want]


def test_repeat_and_unfold_follow_pytorch(torch_reference: Reference) -> None:
    x = f32(2, 5)
    for reps in ((2, 3), (3, 1, 2), (1, 0)):
        got = run(lambda t, r=reps: t.repeat(*r), x)
        want = torch_reference(lambda torch, x, r=reps: torch.from_numpy(x).repeat(*r), x)
        np.testing.assert_array_equal(got, want)
    for axis, size, step in ((1, 2, 1), (1, 3, 2), (0, 2, 1), (-1, 5, 1)):
        got = run(lambda t, a=axis, s=size, p=step: t.unfold(a, s, p), x)
        want = torch_reference(
            lambda torch, x, a=axis, s=size, p=step: torch.from_numpy(x).unfold(a, s, p), x
        )
        np.testing.assert_array_equal(got, want)


def test_shape_errors_are_typed_and_say_what_to_do() -> None:
    g = Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ShapeError, match="unfold size 5 does not fit"):
        x.unfold(0, 5, 1)
    with pytest.raises(ShapeError, match="step must be positive"):
        x.unfold(0, 2, 0)
    with pytest.raises(ShapeError, match="at least one per axis"):
        x.repeat(2)
    with pytest.raises(ShapeError, match="rank >= 2"):
        g.input("v", (3,)).tril()
    with pytest.raises(ShapeError, match="both axis 0"):
        x.diagonal(0, 0, -2)
    with pytest.raises(ArgumentTypeError, match="not static"):
        x.repeat_interleave(g.constant([1, 2, 3]), 0)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="sizes \\[1, 1\\]"):
        x.split([1, 1])
    with pytest.raises(ShapeError, match="start 3 and length 2"):
        x.narrow(0, 3, 2)
    with pytest.raises(ShapeError, match="rank 3"):
        g.input("y", (2, 2, 2)).t()


def test_expansions_keep_the_batch_axis_free() -> None:
    g = Graph()
    x = g.input("x", (2, 6, 3))  # axis 0 may change per run
    outs = [
        x.flip(1),
        x.roll(2, 1),
        x.tril(),
        x.diagonal(0, 1, 2),
        x.unfold(1, 2, 2),
        x.unflatten(1, (2, 3)),
    ]
    outs += [pad(x, (1, 1, 2, 0), mode="reflect"), x.repeat_interleave(2, 2), zeros_like(x)]
    outs += [einsum("bij,bkj->bik", x, x), x[:, [0, 5], [2, 1]]]
    fed = RNG.standard_normal((5, 6, 3)).astype(np.float32)
    got = evaluate(outs, {"x": fed})
    want = [
        np.flip(fed, 1),
        np.roll(fed, 2, 1),
        np.tril(fed),
        np.diagonal(fed, 0, 1, 2),
        np.lib.stride_tricks.sliding_window_view(fed, 2, 1)[:, ::2],
        fed.reshape(5, 2, 3, 3),
        np.pad(fed, ((0, 0), (2, 0), (1, 1)), mode="reflect"),
        np.repeat(fed, 2, 2),
        np.zeros_like(fed),
        np.einsum("bij,bkj->bik", fed, fed),
        fed[:, [0, 5], [2, 1]],
    ]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# -- indexing -----------------------------------------------------------------------------------
def test_gather_and_scatter_follow_pytorch(torch_reference: Reference) -> None:
    x = f32(4, 5)
    idx = RNG.integers(0, 4, (3, 5))
    small = RNG.integers(0, 5, (4, 2))
    src = f32(4, 5)
    checks: list[Callable[..., Any]] = [
        lambda t, i, s, v: t.gather(0, i),
        lambda t, i, s, v: t.gather(1, s),
        lambda t, i, s, v: t.take_along_axis(s, 1),
        lambda t, i, s, v: t.scatter_add(0, i, v),
        lambda t, i, s, v: t.scatter_add(1, s, v),
        lambda t, i, s, v: t.index_select(1, s[:, 0]),
        lambda t, i, s, v: t.scatter(1, s[:, :1], 7.0),
    ]
    reductions = [
        (r, inc) for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
    ]
    for reduce, include in reductions:
        checks.append(lambda t, i, s, v, r=reduce, inc=include: t.scatter_reduce(0, i, v, r, inc))
        checks.append(lambda t, i, s, v, r=reduce, inc=include: t.scatter_reduce(1, s, v, r, inc))

    def theirs(torch: Any, *arrays: np.ndarray) -> list[Any]:
        tx, ti, ts, tsrc = (torch.from_numpy(a) for a in arrays)
        wants = [
            torch.gather(tx, 0, ti),
            torch.gather(tx, 1, ts),
            torch.gather(tx, 1, ts),
            tx.scatter_add(0, ti, tsrc),
            tx.scatter_add(1, ts, tsrc),
            tx.index_select(1, ts[:, 0]),
            tx.scatter(1, ts[:, :1], 7.0),
        ]
        for reduce, include in reductions:
            wants.append(tx.scatter_reduce(0, ti, tsrc[:3], reduce, include_self=include))
            wants.append(tx.scatter_reduce(1, ts, tsrc, reduce, include_self=include))
        return wants

    got = run(lambda t, i, s, v: [f(t, i, s, v) for f in checks], x, idx, small, src)
    wants = torch_reference(theirs, x, idx, small, src)
    for want, value in zip(wants, got, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)


def test_scatter_with_unique_indices_writes_src_as_pytorch(torch_reference: Reference) -> None:
    x = f32(3, 4)
    idx = np.argsort(RNG.standard_normal((3, 4)), axis=1)[:, :2]
    src = f32(3, 2)
    got = run(lambda t, i, s: t.scatter(1, i, s), x, idx, src)
    want = torch_reference(
        lambda torch, x, i, s: torch.from_numpy(x).scatter(
            1, torch.from_numpy(i), torch.from_numpy(s)
        ),
        x,
        idx,
        src,
    )
    np.testing.assert_array_equal(got, want)


def test_advanced_indexing_follows_numpy() -> None:
    x = f32(3, 4, 5)
    i = np.array([[2, 0], [1, 1]])
    j = np.array([3, 1])
    cases: list[Any] = [
        (np.array([2, 0, 2]),),
        (slice(None), np.array([1, 3])),
        (i, j),
        (slice(None), i, j),
        (i, slice(1, 3), j),  # arrays apart: their axes go first, as numpy
        (0, slice(None), j),
        (Ellipsis, [4, 0]),
        (np.array([True, False, True]),),
        (slice(None), np.array([True, False, True, True])),
        (1, -1, [-5, 4]),
    ]
    got = run(lambda t: [t[c] for c in cases], x)
    for c, value in zip(cases, got, strict=True):
        np.testing.assert_array_equal(value, x[c])


def test_indexing_with_index_tensors() -> None:
    x = f32(3, 4, 5)
    i = RNG.integers(0, 3, (2, 2))
    j = RNG.integers(0, 5, (2,))
    got = run(lambda t, a, b: [t[a, :, b], t[:, 1, b], t[a]], x, i, j)
    for value, want in zip(got, [x[i, :, j], x[:, 1, j], x[i]], strict=True):
        np.testing.assert_array_equal(value, want)


def test_a_boolean_tensor_mask_names_the_alternatives() -> None:
    g = Graph()
    x = g.input("x", (3,))
    with pytest.raises(ArgumentTypeError, match=r"masked_fill.*where"):
        x[x > 0]
    with pytest.raises(ArgumentTypeError, match=r"cannot be assigned to.*masked_fill"):
        x[0] = 1.0
    value = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(run(lambda t: t.masked_fill(t < 0, 5.0), value), [1.0, 5.0, 3.0])


def test_index_errors_are_typed() -> None:
    g = Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ShapeError, match="exceeds the value's size"):
        x.take_along_axis(g.constant(np.zeros((3, 5), np.int64)), 0)
    with pytest.raises(ShapeError, match="rank"):
        x.take_along_axis(g.constant(np.zeros(3, np.int64)), 0)
    with pytest.raises(DTypeError, match="int32 or int64"):
        x.take_along_axis(g.input("f", (3, 4)), 0)
    with pytest.raises(ArgumentError, match="reduce must be one of"):
        x.scatter_reduce(0, g.constant(np.zeros((3, 4), np.int64)), x, "max")
    with pytest.raises(ShapeError, match="out of bounds"):
        x[[0, 3]]
    idx = g.input("i", (2, 4), "int64")
    (fn,) = [x.take_along_axis(idx, 0)]
    with pytest.raises(OutOfRangeError, match="take_along_axis: index 3 is out of range"):
        evaluate([fn], {"x": np.zeros((3, 4), np.float32), "i": np.full((2, 4), 3)})


# -- padding --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_follows_torch_functional_pad(mode: str, torch_reference: Reference) -> None:
    x = f32(2, 3, 4, 5)
    widths = [(1, 2), (2, 1, 0, 3), (3, 3, 1, 1, 2, 2), (-1, 2, 1, -2)]
    for w in widths:
        if mode != "constant" and len(w) == 2:
            continue  # PyTorch pads 2 or 3 axes of a 4-D value in these modes
        got = run(lambda t, w=w: pad(t, w, mode=mode, value=0.5), x)
        kwargs = {"value": 0.5} if mode == "constant" else {}
        want = torch_reference(
            lambda torch, x, w=w, k=kwargs: torch.nn.functional.pad(
                torch.from_numpy(x), w, mode=mode, **k
            ),
            x,
        )
        np.testing.assert_allclose(got, want, rtol=0, atol=0)


def test_pad_numpy_form_and_modes() -> None:
    x = f32(3, 4)
    for mode in ("reflect", "edge", "wrap"):
        got = run(lambda t, m=mode: pad(t, ((1, 2), (3, 0)), mode=m), x)
        np.testing.assert_array_equal(got, np.pad(x, ((1, 2), (3, 0)), mode=mode))
    np.testing.assert_array_equal(run(lambda t: pad(t, 1), x), np.pad(x, 1))
    np.testing.assert_array_equal(run(lambda t: pad(t, ((0, 0), (-4, 2))), x), np.zeros((3, 2)))


def test_pad_errors() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ShapeError, match="reflect padding of \\(3, 0\\)"):
        pad(x, (3, 0), mode="reflect")
    with pytest.raises(ShapeError, match="circular"):
        pad(x, (4, 0), mode="circular")
    with pytest.raises(ShapeError, match="last axis first"):
        pad(x, (1, 1, 1))
    with pytest.raises(ArgumentError, match="mode must be one of"):
        pad(x, (1, 1), mode="symmetric")
    with pytest.raises(ShapeError, match="crops more"):
        pad(x, (-2, -2))


# -- linear algebra --------------------------------------------------------------------------------
def test_einsum_follows_numpy_and_torch(torch_reference: Reference) -> None:
    a, b, c = f32(2, 3, 4), f32(4, 5), f32(3)
    sq = f32(3, 3)
    cases = [
        ("abc,cd,b->ad", (a, b, c)),
        ("...c,cd", (a, b)),
        ("ii", (sq,)),
        ("ij,ij->", (sq, sq)),
        ("bij->bji", (a,)),
        ("i,j", (c, c)),
        ("aii->ai", (np.stack([sq, sq]),)),
    ]
    for eq, ops in cases:
        got = run(lambda *t, e=eq: einsum(e, *t), *ops)
        np.testing.assert_allclose(got, np.einsum(eq, *ops), rtol=1e-5, atol=1e-5)
        want = torch_reference(
            lambda torch, *o, e=eq: torch.einsum(e, *(torch.from_numpy(a) for a in o)), *ops
        )
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_einsum_errors() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ShapeError, match="2 operands, 1 given"):
        einsum("ij,jk", x)
    with pytest.raises(ShapeError, match="sizes 3 and 2"):
        einsum("ij,jk", x, x)
    with pytest.raises(ShapeError, match="in no operand"):
        einsum("ij->k", x)
    with pytest.raises(DTypeError, match="float"):
        einsum("i", g.constant([1, 2]))


def test_outer_cross_bmm_and_norms(torch_reference: Reference) -> None:
    u, v = f32(3), f32(4)
    a, b = f32(5, 3), f32(5, 3)
    m = f32(2, 3, 4)
    got = run(lambda x, y: outer(x, y), u, v)
    np.testing.assert_allclose(got, np.outer(u, v), rtol=1e-6)
    got = run(lambda x, y: linalg.cross(x, y), a, b)
    np.testing.assert_allclose(got, np.cross(a, b), rtol=1e-5, atol=1e-6)
    for ord_ in (2, 1, np.inf, -np.inf, 0, 3.5):
        got = run(lambda x, o=ord_: linalg.vector_norm(x, o, axis=-1), m)
        want = torch_reference(
            lambda torch, m, o=ord_: torch.linalg.vector_norm(torch.from_numpy(m), o, dim=-1), m
        )
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for mord in ("fro", 1, -1, np.inf, -np.inf):
        got = run(lambda x, o=mord: linalg.matrix_norm(x, o), m)
        want = torch_reference(
            lambda torch, m, o=mord: torch.linalg.matrix_norm(torch.from_numpy(m), o), m
        )
        np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(run(lambda x: linalg.norm(x), m), np.linalg.norm(m), rtol=1e-5)
    g = Graph()
    with pytest.raises(ArgumentError, match="singular values"):
        linalg.matrix_norm(g.input("x", (3, 3)), "nuc")


# -- creation ------------------------------------------------------------------------------------
def test_creation_functions() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    outs: list[Tensor] = [
        zeros(g, 2, 3),
        ones(g, (4,), dtype="int32"),
        full(g, (2,), 7.5),
        arange(g, 5),
        arange(g, 0.0, 1.0, 0.25),
        linspace(g, -1, 1, 5),
        eye(g, 2, 3),
        zeros_like(x),
        ones_like(x, "int64"),
        full_like(x, 2.0),
    ]
    fed = np.zeros((6, 3), np.float32)  # a larger batch than declared: *_like follow it
    got = evaluate(outs, {"x": fed})
    want = [
        np.zeros((2, 3)),
        np.ones(4),
        np.full(2, 7.5),
        np.arange(5),
        np.arange(0.0, 1.0, 0.25),
        np.linspace(-1, 1, 5),
        np.eye(2, 3),
        np.zeros((6, 3)),
        np.ones((6, 3)),
        np.full((6, 3), 2.0),
    ]
    for t, value, expected in zip(outs, got, want, strict=True):
        np.testing.assert_array_equal(value, expected)
        assert value.dtype.name == t.dtype
    assert [t.dtype for t in outs[:4]] == ["float32", "int32", "float32", "int64"]
    with pytest.raises(ArgumentError, match="step must not be zero"):
        arange(g, 0, 1, 0)
    with pytest.raises(ArgumentTypeError, match="give the Graph"):
        zeros("g", 2)  # type: ignore[arg-type]


def test_a_slice_bound_must_be_an_int() -> None:
    g = Graph()
    x = g.input("x", (5,))
    with pytest.raises(ArgumentTypeError, match=r"slice bounds must be Python ints.*masked_fill"):
        x[: g.constant(2)]
    with pytest.raises(ArgumentTypeError, match=r"slice bounds must be Python ints.*2\.5"):
        x[:2.5]
    np.testing.assert_array_equal(
        run(lambda t: t[np.int64(1) : 4 : np.int32(2)], np.arange(5.0)), [1.0, 3.0]
    )
