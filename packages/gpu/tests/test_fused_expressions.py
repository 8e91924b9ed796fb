"""A fused kernel is one scalar expression: its ops' expressions substituted into one
another, simplified (a subexpression read twice computed once, constants folded) and
rendered to WGSL once; a matmul read by an elementwise chain of its shape stores the
chain as its epilogue, in one dispatch, keeping the product where other kernels read
it too. Every value matches numpy, NaN and infinities included.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.lowering.scalar import render_wgsl_lets, simplify
from asgrad.gpu.plan import build_plan, fusion
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile
from asgrad.tensor.ir import scalar as s

pytestmark = pytest.mark.gpu


def _run(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> tuple[Any, Any]:
    program = compile(outs, backend="gpu")
    got = program(feeds)
    kinds = count_kinds(build_plan(program.executable.schedule, feeds, device).commands)
    return got, kinds


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64)).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (1 + _erf(x / np.float32(math.sqrt(2.0))))


# -- the expression, simplified and rendered once ----------------------------------------
def test_a_subexpression_read_twice_is_computed_once() -> None:
    x = s.arg(0)
    e = s.exp(x) * s.exp(x) + s.exp(x)  # three equal subtrees, made one by simplify
    lets, body = render_wgsl_lets(simplify(e), ["x0"], ["f32"], "f32")
    assert lets == ["let t0 = asg_exp(x0);"]
    assert body == "(t0 * t0) + t0"


def test_float_constants_fold_and_exact_identities_reduce() -> None:
    x = s.arg(0)
    assert repr(simplify((x * (s.const(1.0) - 0.25)) * 1.0)) == "mul(x0, 0.75)"
    twice_negated = s.neg(s.neg(x - 0.0))
    assert repr(simplify(twice_negated / 1.0)) == "x0"
    assert repr(simplify(s.where(True, x, x + 1.0))) == "x0"
    # x + 0 is not x for x = -0.0: kept
    assert repr(simplify(x + 0.0)) == "add(x0, 0.0)"
    # a folded NaN or infinity is still one (rendered through the prelude's helpers)
    _, body = render_wgsl_lets(simplify(x + s.const(0.0) / 0.0), ["x0"], ["f32"], "f32")
    assert body == "x0 + asg_nan()"
    _, body = render_wgsl_lets(simplify(x * s.log(s.const(0.0))), ["x0"], ["f32"], "f32")
    assert body == "x0 * asg_ninf()"


def test_a_fused_chain_with_shared_values_matches_numpy(device: Device) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 9)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    g = Graph()
    t = g.input("x", x.shape, free=())
    e = t.exp()
    out = (e * e + e).tanh() + e.maximum(0.5)  # e read by four ops of one kernel
    (got,), kinds = _run([out], {"x": x}, device)
    ex = np.exp(x)
    want = np.tanh(ex * ex + ex) + np.maximum(ex, np.float32(0.5))
    np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True)
    assert kinds == {"elementwise": 1}, kinds


# -- matmul epilogues ---------------------------------------------------------------------
@pytest.fixture
def operand_epilogues(monkeypatch: pytest.MonkeyPatch) -> None:
    """Epilogues that read operands besides the product (a bias, a residual): the
    kernel supports them; the plan leaves them out by default (`fusion.EPILOGUE_LEAVES`)."""
    monkeypatch.setattr(fusion, "EPILOGUE_LEAVES", 8)


def test_by_default_only_a_chain_of_the_product_alone_is_its_epilogue(device: Device) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    g = Graph()
    tx, tw, tb = (g.input(n, v.shape, free=()) for n, v in zip("xwb", (x, w, b), strict=True))
    (alone,), kinds_alone = _run([(tx @ tw).gelu().tanh()], {"x": x, "w": w}, device)
    np.testing.assert_allclose(alone, np.tanh(_gelu(x @ w)), rtol=1e-5, atol=1e-6)
    assert kinds_alone == {"matmul": 1}, kinds_alone
    (biased,), kinds_biased = _run([(tx @ tw + tb).gelu()], {"x": x, "w": w, "b": b}, device)
    np.testing.assert_allclose(biased, _gelu(x @ w + b), rtol=1e-5, atol=1e-6)
    assert kinds_biased == {"matmul": 1, "elementwise": 1}, kinds_biased


@pytest.mark.usefixtures("operand_epilogues")
def test_linear_gelu_and_residual_are_one_matmul_dispatch(device: Device) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 8)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    r = rng.standard_normal((2, 6, 5)).astype(np.float32)
    g = Graph()
    tx, tw, tb, tr = (
        g.input(n, v.shape, free=()) for n, v in zip("xwbr", (x, w, b, r), strict=True)
    )
    out = ((tx @ tw + tb).gelu() + tr) * 0.5
    (got,), kinds = _run([out], {"x": x, "w": w, "b": b, "r": r}, device)
    want = (_gelu(x @ w + b) + r) * np.float32(0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert kinds == {"matmul": 1}, kinds


@pytest.mark.usefixtures("operand_epilogues")
def test_an_epilogue_keeps_numpys_nan_and_infinities(device: Device) -> None:
    x = np.array([[1.0, np.nan], [np.inf, 1.0], [-np.inf, 0.0]], np.float32)
    w = np.array([[1.0, 0.0, -1.0], [0.0, 1.0, 2.0]], np.float32)
    g = Graph()
    tx, tw = g.input("x", x.shape, free=()), g.input("w", w.shape, free=())
    out = (tx @ tw).maximum(0.0) + (tx @ tw).isnan().astype("float32")
    (got,), kinds = _run([out], {"x": x, "w": w}, device)
    with np.errstate(invalid="ignore"):  # inf * 0 in the product: NaN, as on the GPU
        p = x @ w
    want = np.maximum(p, np.float32(0.0)) + np.isnan(p).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert kinds == {"matmul": 1}, kinds  # one product, read twice by its epilogue


@pytest.mark.usefixtures("operand_epilogues")
def test_a_product_read_by_other_kernels_is_stored_beside_the_epilogue(device: Device) -> None:
    """The product also feeds a reduction: the matmul writes it and relu(p + b) in the
    same dispatch, and the reduction reads the product."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    w = rng.standard_normal((7, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = Graph()
    tx, tw, tb = (g.input(n, v.shape, free=()) for n, v in zip("xwb", (x, w, b), strict=True))
    p = tx @ tw
    outs = [(p + tb).relu(), p.sum(axis=0)]
    (act, total), kinds = _run(outs, {"x": x, "w": w, "b": b}, device)
    np.testing.assert_allclose(act, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, (x @ w).sum(axis=0), rtol=1e-5, atol=1e-5)
    assert kinds["matmul"] == 1, kinds
    assert "elementwise" not in kinds, kinds


def test_a_product_with_split_k_keeps_its_own_elementwise_kernel(device: Device) -> None:
    """K deep enough that the product is split (summed by a column reduction): no
    epilogue, the chain is its own kernel, the values the same."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    w = rng.standard_normal((4096, 64)).astype(np.float32)
    g = Graph()
    tx, tw = g.input("x", x.shape, free=()), g.input("w", w.shape, free=())
    (got,), kinds = _run([(tx @ tw).tanh()], {"x": x, "w": w}, device)
    np.testing.assert_allclose(got, np.tanh(x @ w), rtol=1e-4, atol=1e-4)
    assert kinds["elementwise"] == 1, kinds
    assert kinds["column reduction"] == 1, kinds


def test_a_long_chain_is_cut_into_kernels_it_can_render(device: Device) -> None:
    """A chain of 400 ops (a tree hundreds of levels deep) is launched in pieces of at
    most `MAX_DEPTH` levels, not rendered as one expression."""
    x = np.linspace(-1, 1, 7).astype(np.float32)
    g = Graph()
    t = g.input("x", x.shape, free=())
    want = x.astype(np.float64)
    for i in range(400):
        t = (t * 0.5 + 0.25).tanh() if i % 2 else t.exp().log()
        want = np.tanh(want * 0.5 + 0.25) if i % 2 else np.log(np.exp(want))
    (got,), kinds = _run([t], {"x": x}, device)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # each op adds at most 6 levels (tanh(x * 0.5 + 0.25) and its input's annotation)
    assert 2 <= kinds["elementwise"] <= 400 * 6 // fusion.MAX_DEPTH, kinds


def test_a_chain_over_more_leaves_than_a_kernel_binds_is_cut_by_its_leaves(
    device: Device,
) -> None:
    """``max(x) < 10`` of 24 values combined by ``&``: the chain reads 24 launched
    reductions, more than one kernel binds; it is cut into kernels of as many leaves as
    one binds, not launched node by node."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(24)]
    g = Graph()
    ok: Tensor | None = None
    for k, x in enumerate(xs):
        each = g.input(f"x{k}", x.shape, free=()).max() < 10.0
        ok = each if ok is None else ok & each
    assert ok is not None
    feeds = {f"x{k}": x for k, x in enumerate(xs)}
    (got,), kinds = _run([~ok], feeds, device)
    assert not bool(got)
    (high,), _ = _run([~ok], {**feeds, "x17": np.full((3, 5), 20.0, np.float32)}, device)
    assert bool(high)
    # 24 reductions read by ceil(24 / 6) kernels of the chain (each binds the previous
    # piece's value and 6 more leaves), against 48 node by node
    assert kinds["reduction"] == 24, kinds
    assert kinds["elementwise"] <= 5, kinds


def test_a_value_read_for_its_shape_alone_stays_inlined(device: Device) -> None:
    """A cast read by an add and, for its shape alone, by a ``sum_to_like`` (a float16
    bias's gradient) is computed in the add's kernel, never launched."""
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    b = np.array([0.5, -0.25, 2.0, 1.0], np.float32)
    g = Graph()
    tx, tb = g.input("x", (3, 4), free=()), g.input("b", (4,), free=())
    cast = tb.cast("float16")
    y = tx.cast("float16") + cast
    grad = g.apply("sum_to_like", [y, cast])
    (got_y, got_grad), kinds = _run([y, grad], {"x": x, "b": b}, device)
    want_y = x.astype(np.float16) + b.astype(np.float16)
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_allclose(got_grad, want_y.astype(np.float32).sum(0), rtol=1e-3)
    assert kinds["elementwise"] == 1, kinds  # the add, reading b through its cast


def test_a_chain_reshaped_without_its_leading_one_feeds_a_product() -> None:
    # fed at batch 1, ``(1, 3, 5) -> (3, 5)`` drops a leading 1 the chain's leaves keep
    g = Graph()
    x = g.input("x", (4, 3, 6), free=(0,))
    w = g.input("w", (6, 5))
    y = x @ w
    t = y * g.constant(np.full((1, 1, 1), 2.0, np.float32))
    out = x.reshape(-1, 6).T @ (t + y).reshape(-1, 5)
    program = compile([out], backend="gpu")
    rng = np.random.default_rng(0)
    ws = rng.standard_normal((6, 5)).astype(np.float32)
    for batch in (1, 4):
        xs = rng.standard_normal((batch, 3, 6)).astype(np.float32)
        (got,) = program({"x": xs, "w": ws})
        rows = xs.reshape(-1, 6)
        np.testing.assert_allclose(got, rows.T @ (3 * (rows @ ws)), rtol=1e-5, atol=1e-5)
