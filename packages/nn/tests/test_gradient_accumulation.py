"""Gradient accumulation across compiled programs: ``GradientAccumulator``'s backward
programs add into its gradients, and its step program updates once and zeroes them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph, GraphError

RNG = np.random.default_rng(0)
XA, YA = RNG.normal(size=(8, 3)), RNG.normal(size=(8, 2))
XB, YB = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 2))


def model_and_opt(
    make: Callable[[list[nn.Parameter]], nn.Optimizer],
) -> tuple[nn.Module, nn.Optimizer]:
    model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.Tanh(), nn.Linear(4, 2, rng=1)).double()
    return model, make(model.parameters())


OPTIMIZERS: dict[str, Callable[[list[nn.Parameter]], nn.Optimizer]] = {
    "sgd-momentum": lambda ps: nn.SGD(ps, lr=0.1, momentum=0.9),
    "adam-betas-clip": lambda ps: nn.Adam(ps, lr=0.01, betas=(0.5, 0.999), clip_grad_norm=0.5),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_two_losses_accumulated_equal_one_step_on_their_sum(name: str) -> None:
    # Reference: one compiled step on loss_a + loss_b (one graph).
    ref, ref_opt = model_and_opt(OPTIMIZERS[name])
    g = Graph()
    xa, ya = g.input("xa", (8, 3), "float64"), g.input("ya", (8, 2), "float64")
    xb, yb = g.input("xb", (5, 3), "float64"), g.input("yb", (5, 2), "float64")
    step = ref_opt.compile(nn.mse_loss(ref(xa), ya) + nn.mse_loss(ref(xb), yb))
    # Accumulated: loss_a and loss_b in two graphs, two programs, then the update.
    model, opt = model_and_opt(OPTIMIZERS[name])
    acc = nn.GradientAccumulator(opt)
    ga, gb = Graph("a"), Graph("b")
    xa2, ya2 = ga.input("x", (8, 3), "float64"), ga.input("y", (8, 2), "float64")
    xb2, yb2 = gb.input("x", (5, 3), "float64"), gb.input("y", (5, 2), "float64")
    backward_a = acc.compile(nn.mse_loss(model(xa2), ya2))
    backward_b = acc.compile(nn.mse_loss(model(xb2), yb2))
    update = acc.compile_step()
    for _ in range(3):
        step(xa=XA, ya=YA, xb=XB, yb=YB)
        backward_a(x=XA, y=YA)
        backward_b(x=XB, y=YB)
        assert float(np.abs(acc.grad(model[0].weight).value).sum()) > 0
        assert int(update()[0]) == int(opt.step_count.value)
        assert not acc.grad(model[0].weight).value.any()  # zeroed by the step
    for (name_ref, p_ref), (_, p) in zip(
        ref.named_parameters(), model.named_parameters(), strict=True
    ):
        np.testing.assert_allclose(p.value, p_ref.value, rtol=1e-12, err_msg=name_ref)
    assert int(opt.step_count.value) == 3


def test_micro_batches_averaged_equal_the_full_batch() -> None:
    x, y = np.concatenate([XA, XA[::-1]]), np.concatenate([YA, YA[::-1]])
    ref, ref_opt = model_and_opt(OPTIMIZERS["sgd-momentum"])
    g = Graph()
    xf, yf = g.input("x", (16, 3), "float64"), g.input("y", (16, 2), "float64")
    full = ref_opt.compile(nn.mse_loss(ref(xf), yf))
    model, opt = model_and_opt(OPTIMIZERS["sgd-momentum"])
    acc = nn.GradientAccumulator(opt)
    gm = Graph()
    xm, ym = gm.input("x", (8, 3), "float64"), gm.input("y", (8, 2), "float64")
    micro = acc.compile(nn.mse_loss(model(xm), ym))
    update = acc.compile_step(average=True)
    for _ in range(2):
        full(x=x, y=y)
        micro(x=x[:8], y=y[:8])
        micro(x=x[8:], y=y[8:])
        update()
    np.testing.assert_allclose(model[2].weight.value, ref[2].weight.value, rtol=1e-12)


def test_batch_norm_statistics_update_in_each_backward_program() -> None:
    bn = nn.BatchNorm1d(2, dtype="float64")
    acc = nn.GradientAccumulator(nn.SGD(bn.parameters(), lr=0.1))
    g = Graph()
    backward = acc.compile(bn(g.input("x", (4, 2), "float64")).sum())
    backward(x=RNG.normal(size=(4, 2)))
    backward(x=RNG.normal(size=(4, 2)))
    assert int(bn.num_batches_tracked.value) == 2


def test_zero_grad_and_errors() -> None:
    model, opt = model_and_opt(OPTIMIZERS["sgd-momentum"])
    acc = nn.GradientAccumulator(opt)
    with pytest.raises(GraphError, match="compile a backward program first"):
        acc.compile_step()
    with pytest.raises(GraphError, match="not one of the optimizer's"):
        acc.grad(nn.Linear(2, 2).weight)
    g = Graph()
    backward = acc.compile(model(g.input("x", (8, 3), "float64")).sum())
    backward(x=XA)
    acc.zero_grad()
    assert not acc.grad(model[0].weight).value.any()
    before = model[0].weight.value.copy()
    acc.compile_step()()
    np.testing.assert_array_equal(model[0].weight.value, before)  # a zero gradient
    with pytest.raises(GraphError, match="none of the optimizer's parameters"):
        acc.compile(Graph().input("z", (2,)).sum())
