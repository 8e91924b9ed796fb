"""Gradients of the neural-network ops: first order, higher order, and composed.

Every differentiable registry case of an nn op is checked by float64 central
differences (``check_op_case``). Second-order checks differentiate a gradient
graph, which exercises the rules of the backward ops (``conv2d_backward_*``,
``max_pool2d_backward``/``select``, the composite norms' backward ops). Last, small
networks built from the functional wrappers are checked end to end.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.autograd import check_op_case, get_rule, grad, gradient_check
from asgrad.tensor import Graph, OpCase, OpDef, Tensor, all_ops, compile
from asgrad.tensor.api.nn_functional import (
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv2d,
    conv_transpose2d,
    dropout,
    embedding,
    layer_norm,
    max_pool2d,
)
from asgrad.tensor.ops.random import dropout_keep

NN_OPS = [
    op
    for op in all_ops()
    if op.family in ("conv", "pool", "norm", "random")
    and op.name not in ("softmax", "log_softmax")
    and op.differentiable  # rand_like and randn_like: samples, without a gradient
    and op.primitive  # ops that expand into others: checked in test_op_gradients.py
]


def _grad_cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(1)
    out: list[tuple[OpDef, OpCase]] = []
    for op in NN_OPS:
        assert op.cases is not None
        out.extend((op, case) for case in op.cases(rng) if case.grad)
    return out


GRAD_CASES = _grad_cases()


def test_every_nn_op_has_a_rule_and_a_gradient_case() -> None:
    assert len(NN_OPS) == 16
    assert all(op.differentiable and get_rule(op.name) is not None for op in NN_OPS)
    assert {op.name for op, _ in GRAD_CASES} == {op.name for op in NN_OPS}


@pytest.mark.parametrize(
    ("op", "case"), GRAD_CASES, ids=[f"{op.name}[{case.label}]" for op, case in GRAD_CASES]
)
def test_gradient_matches_finite_differences(op: OpDef, case: OpCase) -> None:
    check_op_case(op, case)


# -- second order: differentiate the gradient graph ---------------------------------------
def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    size = int(np.prod(shape))
    return (rng.permutation(size) * 0.1 - size * 0.05).reshape(shape)


def _first_grad(loss: Tensor, wrt: Tensor) -> Tensor:
    (g,) = grad(loss, [wrt])
    return g


SecondOrder = tuple[str, Callable[..., Tensor], list[np.ndarray]]


def _second_order_cases() -> list[SecondOrder]:
    r = _rng(7)
    x4, w4 = r.standard_normal((2, 2, 5, 5)), r.standard_normal((3, 2, 3, 3))
    wt = r.standard_normal((2, 3, 3, 3))
    return [
        (
            "conv2d d/dx",
            lambda x, w: _first_grad((conv2d(x, w, stride=2, padding=1) ** 2).sum(), x),
            [x4, w4],
        ),
        (
            "conv2d d/dw",
            lambda x, w: _first_grad((conv2d(x, w, dilation=2, padding=1) ** 2).sum(), w),
            [x4, w4],
        ),
        (
            "grouped conv2d d/dw",
            lambda x, w: _first_grad((conv2d(x, w, groups=2, padding=1) ** 2).sum(), w),
            [r.standard_normal((1, 4, 4, 4)), r.standard_normal((2, 2, 3, 3))],
        ),
        (
            "conv_transpose2d d/dx",
            lambda x, w: _first_grad(
                (conv_transpose2d(x, w, stride=2, output_padding=1) ** 2).sum(), x
            ),
            [r.standard_normal((1, 2, 3, 3)), wt],
        ),
        (
            "max_pool2d",
            lambda x: _first_grad((max_pool2d(x * x, 2, 1) ** 2).sum(), x),
            [_distinct(r, 1, 2, 4, 4) + 0.03],
        ),
        (
            "avg_pool2d",
            lambda x: _first_grad((avg_pool2d(x, 3, 2, 1, count_include_pad=False) ** 3).sum(), x),
            [r.standard_normal((1, 2, 5, 5))],
        ),
        (
            "adaptive_avg_pool2d",
            lambda x: _first_grad((adaptive_avg_pool2d(x, (2, 3)) ** 3).sum(), x),
            [r.standard_normal((1, 2, 5, 4))],
        ),
        (
            "layer_norm d/dx",
            lambda x, w, b: _first_grad((layer_norm(x, w, b) ** 3).sum(), x),
            [r.standard_normal((3, 4)), r.standard_normal(4), r.standard_normal(4)],
        ),
        (
            "layer_norm d/dw",
            lambda x, w, b: _first_grad((layer_norm(x, w, b) ** 3).sum(), w),
            [r.standard_normal((3, 4)), r.standard_normal(4), r.standard_normal(4)],
        ),
        (
            "batch_norm d/dx",
            lambda x, w, b: _first_grad(
                (batch_norm(x, None, None, w, b, training=True).y ** 3).sum(), x
            ),
            [r.standard_normal((3, 2, 2, 2)), r.standard_normal(2), r.standard_normal(2)],
        ),
        (
            "dropout",
            lambda x, s: _first_grad((dropout(x, 0.4, s) ** 3).sum(), x),
            [r.standard_normal((4, 5)), np.array(3, np.int64)],
        ),
    ]


SECOND_ORDER = _second_order_cases()


@pytest.mark.parametrize(
    ("label", "build", "inputs"), SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER]
)
def test_second_order_gradient(
    label: str, build: Callable[..., Tensor], inputs: list[np.ndarray]
) -> None:
    wrt = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    gradient_check(build, inputs, wrt=wrt, rtol=1e-5, atol=1e-6)


def test_norm_backward_rules_give_partial_derivatives() -> None:
    # In d/dx of layer_norm(x)**3 the incoming gradient of layer_norm_backward is
    # itself a function of x; the rule must not count that path twice.
    def build(x: Tensor) -> Tensor:
        y = layer_norm(x)
        (gx,) = grad((y**3).sum(), [x])
        (gxx,) = grad((gx * gx).sum(), [x])
        return gxx

    gradient_check(build, [_rng(3).standard_normal((2, 5))], rtol=1e-5, atol=1e-6)


# -- composed networks ------------------------------------------------------------------------
def test_small_cnn_gradients() -> None:
    r = _rng(11)

    def build(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
        h = conv2d(x, w1, b1, padding=1).tanh()
        h = max_pool2d(h, 2)
        h = batch_norm(h, None, None, gamma, beta, training=True).y
        h = conv2d(h, w2, padding="same").sigmoid()
        h = adaptive_avg_pool2d(h, 1).reshape(h.shape[0], -1)
        return layer_norm(h)

    inputs = [
        r.standard_normal((2, 1, 6, 6)),
        r.standard_normal((3, 1, 3, 3)) * 0.5,
        r.standard_normal(3) * 0.1,
        r.standard_normal((4, 3, 3, 3)) * 0.5,
        r.uniform(0.5, 1.5, 3),
        r.standard_normal(3) * 0.1,
    ]
    gradient_check(build, inputs, rtol=1e-5, atol=1e-6)


def test_batch_norm_evaluation_gradients() -> None:
    r = _rng(12)

    def build(x: Tensor, mean: Tensor, var: Tensor, w: Tensor, b: Tensor) -> Tensor:
        return batch_norm(x, mean, var, w, b, training=False).y

    inputs = [
        r.standard_normal((3, 2, 2)),
        r.standard_normal(2),
        r.uniform(0.5, 2.0, 2),
        r.standard_normal(2),
        r.standard_normal(2),
    ]
    gradient_check(build, inputs)


def test_embedding_gradient_accumulates_repeated_rows() -> None:
    ids = np.array([[1, 3, 1], [0, 1, 3]])
    gradient_check(
        lambda idx, w: embedding(idx, w) * 2.0,
        [ids, _rng(13).standard_normal((5, 3))],
        wrt=[1],
    )
    g = Graph()
    idx, w = g.input("idx", (2, 3), "int64"), g.input("w", (5, 3), "float64")
    (gw,) = grad(embedding(idx, w).sum(), [w])
    (got,) = compile([gw])({"idx": ids, "w": np.zeros((5, 3))})
    np.testing.assert_array_equal(got[:, 0], [1.0, 3.0, 0.0, 2.0, 0.0])


def test_dropout_gradient_uses_the_forward_mask() -> None:
    g = Graph()
    x, seed = g.input("x", (6, 7), "float64"), g.input("seed", (), "int64")
    (gx,) = grad(dropout(x, 0.5, seed).sum(), [x])
    prog = compile([gx])
    for s in (0, 1, 99):
        (got,) = prog({"x": np.ones((6, 7)), "seed": np.array(s)})
        np.testing.assert_array_equal(got, dropout_keep((6, 7), s, 0.5) * 2.0)


def test_conv_gradients_work_for_another_batch_size() -> None:
    # The backward ops read shapes at run time: a graph built for batch 2 runs at 5.
    g = Graph()
    x, w = g.input("x", (2, 3, 6, 6)), g.input("w", (4, 3, 3, 3))
    y = max_pool2d(conv2d(x, w, padding=1), 2)
    gx, gw = grad((y * y).sum(), [x, w])
    r = _rng(14)
    xv = r.standard_normal((5, 3, 6, 6)).astype(np.float32)
    wv = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got_x, got_w = compile([gx, gw])({"x": xv, "w": wv})
    assert got_x.shape == (5, 3, 6, 6)
    assert got_w.shape == (4, 3, 3, 3)
    # The weight gradient is the sum of the per-sample ones.
    prog = compile([gw])
    per_sample = sum(prog({"x": xv[i : i + 1], "w": wv})[0] for i in range(5))
    np.testing.assert_allclose(got_w, per_sample, rtol=1e-4, atol=1e-4)
