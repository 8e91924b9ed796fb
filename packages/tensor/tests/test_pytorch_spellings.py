"""PyTorch's spellings on tensors: ``dim``/``keepdim`` beside ``axis``/``keepdims`` (one
meaning; both given is an error), ``cat``, ``size()``/``size(dim)``, ``numel``, ``pow``,
``mm``, ``norm``, ``log1p``, casts, comparisons, and typed errors for the define-by-run
habits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import asgrad.tensor.api.functional_shape as ts
from asgrad.tensor import Graph, Tensor, cat, evaluate, linalg
from asgrad.tensor.api import functional_reduce as fr
from asgrad.tensor.api import nn_activation as fa
from asgrad.tensor.api import nn_norms as fn
from asgrad.tensor.errors import (
    ArgumentError,
    ArgumentTypeError,
    DefineByRunError,
    ShapeError,
)

X = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7.0 - 1.5

# (numpy spelling, PyTorch spelling) of the same call
PAIRS: list[tuple[str, Callable[[Tensor], object], Callable[[Tensor], object]]] = [
    ("sum", lambda x: x.sum(axis=1), lambda x: x.sum(dim=1)),
    ("sum keep", lambda x: x.sum(1, keepdims=True), lambda x: x.sum(dim=1, keepdim=True)),
    ("mean", lambda x: x.mean(axis=(0, 2)), lambda x: x.mean(dim=(0, 2))),
    ("max", lambda x: x.max(axis=-1), lambda x: x.max(dim=-1).values),
    ("min", lambda x: x.min(axis=0, keepdims=True), lambda x: x.min(dim=0, keepdim=True)[0]),
    ("var", lambda x: x.var(axis=1, correction=1), lambda x: x.var(dim=1, correction=1)),
    ("std", lambda x: x.std(axis=2, keepdims=True), lambda x: x.std(dim=2, keepdim=True)),
    ("prod", lambda x: x.prod(axis=1), lambda x: x.prod(dim=1)),
    ("logsumexp", lambda x: x.logsumexp(axis=2), lambda x: x.logsumexp(dim=2)),
    ("amax", lambda x: x.amax(axis=1), lambda x: x.amax(dim=1)),
    ("argmax", lambda x: x.argmax(axis=1), lambda x: x.argmax(dim=1)),
    ("argmin", lambda x: x.argmin(axis=0, keepdims=True), lambda x: x.argmin(dim=0, keepdim=True)),
    ("cumsum", lambda x: x.cumsum(axis=1), lambda x: x.cumsum(dim=1)),
    ("sort", lambda x: x.sort(axis=1)[1], lambda x: x.sort(dim=1)[1]),
    ("topk", lambda x: x.topk(2, axis=1)[0], lambda x: x.topk(2, dim=1)[0]),
    ("softmax", lambda x: x.softmax(axis=1), lambda x: x.softmax(dim=1)),
    ("log_softmax", lambda x: x.log_softmax(0), lambda x: fa.log_softmax(x, dim=0)),
    ("F.softmax axis", lambda x: x.softmax(1), lambda x: fa.softmax(x, axis=1)),
    ("split", lambda x: x.split(2, axis=2)[1], lambda x: x.split(2, dim=2)[1]),
    ("chunk", lambda x: x.chunk(3, axis=1)[2], lambda x: x.chunk(3, dim=1)[2]),
    ("unbind", lambda x: x.unbind(axis=1)[0], lambda x: x.unbind(dim=1)[0]),
    ("squeeze", lambda x: x[:1].squeeze(axis=0), lambda x: x[:1].squeeze(dim=0)),
    ("unsqueeze", lambda x: x.unsqueeze(axis=1), lambda x: x.unsqueeze(dim=1)),
    ("flip", lambda x: x.flip(0, 2), lambda x: x.flip(dims=(0, 2))),
    ("roll", lambda x: x.roll(1, axis=2), lambda x: x.roll(1, dims=2)),
    ("cat", lambda x: cat([x, x], axis=1), lambda x: cat([x, x], dim=1)),
    ("norm", lambda x: linalg.vector_norm(x, 2, axis=1), lambda x: x.norm(dim=1)),
    ("fn var", lambda x: fr.var(x, axis=1), lambda x: fr.var(x, dim=1)),
    ("flatten", lambda x: x.flatten(1), lambda x: x.flatten(start_dim=1)),
    ("flatten end", lambda x: x.reshape(6, 4), lambda x: x.flatten(0, 1)),
    ("flatten mid", lambda x: x.reshape(2, 12), lambda x: x.flatten(start_dim=1, end_dim=2)),
    ("narrow", lambda x: x.narrow(2, 1, 2), lambda x: x.narrow(dim=2, start=1, length=2)),
    ("normalize", lambda x: fn.normalize(x, dim=2), lambda x: fn.normalize(x, axis=2)),
    ("fn cumsum", lambda x: fr.cumsum(x, axis=0), lambda x: fr.cumsum(x, dim=0)),
]


@pytest.mark.parametrize(("name", "numpy_form", "torch_form"), PAIRS, ids=[p[0] for p in PAIRS])
def test_dim_and_keepdim_mean_axis_and_keepdims(
    name: str, numpy_form: Callable[[Tensor], Tensor], torch_form: Callable[[Tensor], Tensor]
) -> None:
    g = Graph()
    x = g.input("x", X.shape, "float64")
    a, b = evaluate([numpy_form(x), torch_form(x)], {"x": X})
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.sum(axis=1, dim=1),
        lambda x: x.mean(keepdims=True, keepdim=True),
        lambda x: x.argmax(axis=0, dim=1),
        lambda x: x.softmax(0, dim=0),
        lambda x: x.split(1, axis=0, dim=0),
        lambda x: cat([x, x], axis=0, dim=0),
        lambda x: x.norm(axis=0, dim=0),
        lambda x: x.max(axis=0, dim=0),
        lambda x: x.index_select(0, x.graph.constant([0]), dim=0),
        lambda x: x.take_along_axis(x.graph.constant([[0, 0, 0]]), 0, dim=0),
        lambda x: x.scatter_add(0, x.graph.constant([[0, 0, 0]]), x, dim=0),
    ],
)
def test_giving_both_spellings_is_an_argument_error(call: Callable[[Tensor], object]) -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ArgumentError, match="give one of them"):
        call(x)


def test_size_is_the_count_and_pytorchs_size_call() -> None:
    x = Graph().input("x", (2, 3, 4))
    assert x.size == 24
    assert x.numel() == 24
    assert x.dim() == 3
    assert x.size() == (2, 3, 4)
    assert (x.size(0), x.size(-1)) == (2, 4)
    with pytest.raises(ShapeError):
        Graph().input("s", ()).size(0)


def test_pytorch_named_methods_compute_their_ops() -> None:
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    v = np.array([[1e-12, 0.5, -0.5], [0.0, 3.0, -0.99]])
    m = np.arange(6.0).reshape(3, 2)
    outs = evaluate(
        [x.log1p(), x.pow(2), x.mm(m), x.norm(), x.eq(0.0), x.ge(0.5), x.float(), x.contiguous()],
        {"x": v},
    )
    np.testing.assert_allclose(outs[0], np.log1p(v), rtol=1e-15)
    np.testing.assert_allclose(outs[1], v**2)
    np.testing.assert_allclose(outs[2], v @ m)
    np.testing.assert_allclose(outs[3], np.linalg.norm(v))
    np.testing.assert_array_equal(outs[4], v == 0.0)
    np.testing.assert_array_equal(outs[5], v >= 0.5)
    assert outs[6].dtype == np.float32
    np.testing.assert_array_equal(outs[7], v)


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda x: x.backward(), "opt.compile(loss)"),
        (lambda x: x.item(), "evaluate"),
        (lambda x: x.grad, "autograd.grad(loss"),
        (lambda x: x.data, "p.value"),
        (lambda x: x.cuda(), "backend='gpu'"),
    ],
)
def test_define_by_run_habits_name_the_asgrad_way(
    call: Callable[[Tensor], object], names: str
) -> None:
    x = Graph().input("x", (2,))
    with pytest.raises(DefineByRunError, match=names.replace("(", r"\(").replace(")", r"\)")):
        call(x)
    assert not hasattr(x, "grad")  # an AttributeError still, as hasattr expects


def test_gather_takes_pytorchs_keywords() -> None:
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    index = g.constant(np.array([[2, 0], [1, 1]]))
    a, b = evaluate([x.gather(1, index), x.gather(dim=1, index=index)], {"x": X[0, :2, :3]})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        a, np.take_along_axis(X[0, :2, :3], np.array([[2, 0], [1, 1]]), 1)
    )


def test_clone_to_type_as_view_as_and_expand() -> None:
    g = Graph()
    x = g.input("x", (2, 1), "float64")
    y = g.input("y", (3, 2, 4), "float32")
    assert x.clone() is x
    assert x.to("float32").dtype == "float32"
    assert x.to(y).dtype == "float32"
    assert x.type_as(y).dtype == "float32"
    assert x.view_as(g.input("z", (1, 2))).shape == (1, 2)
    assert x.expand(3, -1, 4).shape == (3, 2, 4)
    assert x.expand((2, 5)).shape == (2, 5)
    assert x.expand_as(y).shape == (3, 2, 4)
    with pytest.raises(DefineByRunError, match="backend='gpu'"):
        x.to("cuda:0")
    with pytest.raises(ShapeError):
        y.expand(2, 4)


TIES = np.array([[1.0, 7.0, 7.0, -2.0], [5.0, 5.0, 0.0, 5.0], [-1.0, -3.0, -3.0, 4.0]])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_max_and_min_over_dim_give_pytorchs_values_and_first_indices(axis: int, keep: bool) -> None:
    g = Graph()
    x = g.input("x", TIES.shape, "float64")
    hi, lo = x.max(dim=axis, keepdim=keep), x.min(dim=axis, keepdim=keep)
    assert (hi.values, hi.indices) == tuple(hi)
    got = evaluate([hi.values, hi.indices, lo.values, lo.indices], {"x": TIES})
    want = [
        np.max(TIES, axis, keepdims=keep),
        np.argmax(TIES, axis, keepdims=keep),
        np.min(TIES, axis, keepdims=keep),
        np.argmin(TIES, axis, keepdims=keep),
    ]
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert got[1].dtype == np.int64


def test_max_and_min_without_dim_keep_numpys_values_only() -> None:
    x = Graph().input("x", TIES.shape, "float64")
    for out in (x.max(), x.max(1), x.max(axis=1), x.min(axis=(0, 1)), x.amax(dim=1)):
        assert isinstance(out, Tensor)
    got = evaluate([x.max(axis=1), x.amin(dim=0)], {"x": TIES})
    np.testing.assert_array_equal(got[0], TIES.max(1))
    np.testing.assert_array_equal(got[1], TIES.min(0))


def test_max_over_several_dims_is_a_typed_error() -> None:
    x = Graph().input("x", TIES.shape)
    with pytest.raises(ArgumentTypeError, match="amax"):
        x.max(dim=(0, 1))  # type: ignore[call-overload]


def test_index_functions_take_pytorchs_dim_keyword() -> None:
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    v = X[0, :2, :3]
    rows = g.constant(np.array([1, 0, 1]))
    idx = g.constant(np.array([[2, 0, 1], [1, 1, 0]]))
    idx0 = g.constant(np.array([[1, 0, 1], [0, 0, 1]]))
    src = g.constant(np.arange(6.0).reshape(2, 3)).cast("float64")
    pairs = [
        (x.index_select(0, rows), x.index_select(dim=0, index=rows)),
        (ts.index_select(x, 1, rows), ts.index_select(x, dim=1, index=rows)),
        (x.take_along_axis(idx, 1), x.take_along_axis(idx, dim=1)),
        (ts.take_along_axis(x, idx, 1), ts.take_along_axis(x, idx, dim=1)),
        (x.scatter(1, idx, src), x.scatter(dim=1, index=idx, src=src)),
        (ts.scatter(x, 1, idx, 9.0), ts.scatter(x, dim=1, index=idx, src=9.0)),
        (x.scatter_add(1, idx, src), x.scatter_add(dim=1, index=idx, src=src)),
        (ts.scatter_add(x, 0, idx0, src), ts.scatter_add(x, dim=0, index=idx0, src=src)),
        (
            x.scatter_reduce(1, idx, src, "sum"),
            x.scatter_reduce(dim=1, index=idx, src=src, reduce="sum"),
        ),
        (
            ts.scatter_reduce(x, 0, idx0, src, "amin", False),
            ts.scatter_reduce(x, dim=0, index=idx0, src=src, reduce="amin", include_self=False),
        ),
    ]
    outs = evaluate([t for pair in pairs for t in pair], {"x": v})
    for a, b in zip(outs[::2], outs[1::2], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(outs[0], v[[1, 0, 1]])
    want = v.copy()
    np.add.at(
        want,
        (np.arange(2)[:, None], np.array([[2, 0, 1], [1, 1, 0]])),
        np.arange(6.0).reshape(2, 3),
    )
    np.testing.assert_array_equal(outs[12], want)


def test_index_functions_need_their_axis_and_index() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ArgumentError, match="axis"):
        x.index_select(index=g.constant([0]))
    with pytest.raises(ArgumentError, match="index is required"):
        x.scatter_add(dim=0)
    with pytest.raises(ArgumentError, match="src is required"):
        x.scatter(dim=0, index=g.constant([[0, 0, 0]]))
