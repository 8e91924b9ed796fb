"""A GELU's gradient computes its CDF and its density from one exp: ``1 + erf(c * t)``
beside ``exp(-c**2 * t * t)`` renders as prelude.wgsl's ``asg_one_plus_erf`` of that
exp (no branch, no exp of its own), and a GELU's ``1 + erf`` alone without a branch
(``asg_one_plus_erf_exp``), with numpy's values, NaN and infinities included."""

from __future__ import annotations

import math

import numpy as np

from asgrad.autograd import grad
from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering.elementwise import elementwise_tree
from asgrad.gpu.lowering.scalar import render_wgsl, render_wgsl_lets, simplify
from asgrad.tensor import Graph, compile
from asgrad.tensor.ir import scalar as s

C = 1 / math.sqrt(2.0)
K = 1 / math.sqrt(2.0 * math.pi)
EDGES = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 30.0, -30.0, 200.0, -200.0],
    np.float32,
)


def _gelu_gradient(t: s.Expr, dy: s.Expr) -> s.Expr:
    """The expression the GPU plan fuses for a GELU's backward (as autograd builds it)."""
    cdf = s.const(0.5) * (s.const(1.0) + s.erf(t * C))
    density = s.exp((s.const(-0.5) * t) * t) * K
    return dy * (cdf + t * density)


def test_the_cdf_and_the_density_share_one_exp() -> None:
    t = s.arg(1) + s.arg(2)  # a bias added to the product, as in a Linear
    lets, body = render_wgsl_lets(
        simplify(_gelu_gradient(t, s.arg(0))), ["x0", "x1", "x2"], ["f32"] * 3, "f32"
    )
    text = "\n".join([*lets, body])
    assert text.count("asg_exp(") == 1, text
    assert "asg_one_plus_erf(" in text, text
    assert "asg_erf(" not in text, text


def test_one_plus_erf_without_its_exp_takes_its_own_and_erf_alone_stays() -> None:
    t = s.arg(0)
    other = (s.const(1.0) + s.erf(t * 0.5)) * s.exp((s.const(-0.5) * t) * t)  # needs k=-1/4
    _, body = render_wgsl_lets(simplify(other), ["x0"], ["f32"], "f32")
    assert "asg_one_plus_erf_exp(" in body  # a GELU's forward: no branch, its own exp
    assert "asg_erf(" not in body
    _, alone = render_wgsl_lets(simplify(s.erf(t) * 2.0), ["x0"], ["f32"], "f32")
    assert "asg_erf(" in alone  # erf itself keeps its relative accuracy near 0
    # without named values (render_wgsl) the op's own spelling is kept
    plain = render_wgsl(simplify(_gelu_gradient(t, s.arg(1))), ["x0", "x1"], ["f32"] * 2, "f32")
    assert "asg_erf(" in plain
    assert "asg_one_plus_erf" not in plain


def _one_plus_erf(x: np.ndarray) -> np.ndarray:
    """``1 + erf(x)`` in float64 as ``erfc(-x)``: no cancellation in the tail x << 0
    (where the GPU keeps its digits too)."""
    value = np.vectorize(math.erfc, otypes=[np.float64])(-np.nan_to_num(x))
    return np.where(np.isnan(x), np.nan, value)


def test_a_gelu_without_a_branch_matches_numpy(device: Device) -> None:
    t = np.concatenate([np.linspace(-12, 12, 4001, dtype=np.float32), EDGES])
    tree = (s.const(0.5) * s.arg(0)) * (s.const(1.0) + s.erf(s.arg(0) * C))
    got = elementwise_tree(tree, [to_gpu(t, device)], np.float32, t.shape)
    with np.errstate(all="ignore"):
        t64 = t.astype(np.float64)
        want = 0.5 * t64 * _one_plus_erf(t64 * C)
    near = np.abs(t) < 5
    np.testing.assert_allclose(got.numpy()[near], want[near], rtol=2e-6, atol=1e-37)
    # the tail keeps its digits up to exp(-x * x) of a rounded x * x (relative 6e-8 of
    # x * x, x = t / sqrt 2): where numpy's 1 + erf(x) has cancelled to 0
    far = ~near
    np.testing.assert_allclose(
        got.numpy()[far], want[far].astype(np.float32), rtol=3e-5, atol=1e-37, equal_nan=True
    )


def test_the_shared_exp_matches_numpy_over_the_range_and_its_edges(device: Device) -> None:
    t = np.concatenate([np.linspace(-12, 12, 4001, dtype=np.float32), EDGES])
    dy = np.random.default_rng(0).uniform(0.5, 2, t.shape).astype(np.float32)
    tree = _gelu_gradient(s.arg(1), s.arg(0))
    got = elementwise_tree(tree, [to_gpu(dy, device), to_gpu(t, device)], np.float32, t.shape)
    with np.errstate(all="ignore"):
        t64 = t.astype(np.float64)
        cdf = 0.5 * _one_plus_erf(t64 * C)
        want = dy * (cdf + t64 * (np.exp(-0.5 * t64 * t64) * K))
    np.testing.assert_allclose(
        got.numpy(), want.astype(np.float32), rtol=2e-6, atol=2e-7, equal_nan=True
    )


def test_a_gelu_gradient_on_the_gpu_matches_the_cpu(device: Device) -> None:
    rng = np.random.default_rng(1)
    x_np = np.concatenate([rng.standard_normal(500).astype(np.float32) * 3, EDGES])
    w_np = rng.uniform(-1, 1, x_np.shape).astype(np.float32)
    g = Graph()
    x, w = g.input("x", x_np.shape), g.input("w", w_np.shape)
    loss = (x.gelu() * w).sum()
    (dx,) = grad(loss, [x])
    feeds = {"x": x_np, "w": w_np}
    got = compile([dx], backend="gpu")(feeds)[0]
    with np.errstate(all="ignore"):  # inf * 0 in the CPU's own kernel: NaN, as here
        want = compile([dx], backend="cpu")(feeds)[0]
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), rtol=2e-6, atol=2e-7, equal_nan=True
    )
