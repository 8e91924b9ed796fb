"""Attention as one kernel on the GPU (asgrad.gpu.plan.attention): the forward and the
gradients of ``scaled_dot_product_attention``, ``SelfAttention`` and a
``TransformerBlock`` match the CPU, the fused kernels are what the plan launches, and
the shapes and graphs the kernels do not take fall back to the unfused nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.gpu import Device, GpuError
from asgrad.gpu.backend import GpuBackend
from asgrad.gpu.plan import attention, build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, MemoryBudgetError, Tensor, compile, evaluate, make_schedule

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(0)


def _randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _kinds(program: Any, feeds: dict[str, np.ndarray], device: Device) -> Any:
    return count_kinds(build_plan(program.executable.schedule, feeds, device).commands)


def _sdpa_step(
    shapes: tuple[tuple[int, ...], ...], mask: np.ndarray | None, **attrs: Any
) -> tuple[list[Tensor], dict[str, np.ndarray]]:
    """SDPA's output and the gradients of ``sum(o * w)`` with respect to q, k and v."""
    g = Graph()
    qs, ks, vs = shapes
    feeds = {"q": _randn(*qs), "k": _randn(*ks), "v": _randn(*vs)}
    q, k, v = (g.input(n, feeds[n].shape) for n in ("q", "k", "v"))
    ins = [q, k, v]
    if mask is not None:
        feeds["m"] = mask
        ins.append(g.input("m", mask.shape, "bool" if mask.dtype == bool else "float32"))
    o = g.apply("scaled_dot_product_attention", tuple(ins), attrs)
    feeds["w"] = _randn(*o.shape)
    loss = (o * g.input("w", o.shape)).sum()
    return [o, *grad(loss, [q, k, v])], feeds


def _check(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> Any:
    """GPU and CPU agree (NaN where the CPU has NaN); the GPU plan's dispatch kinds."""
    program = compile(outs, backend="gpu")
    got = program(feeds)
    want = evaluate(outs, feeds, backend="cpu")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    return _kinds(program, feeds, device)


B, H, L, S, E, EV = 2, 3, 19, 21, 5, 7  # L, S not multiples of the kernels' 16 and 8


@pytest.mark.parametrize(
    ("mask", "attrs"),
    [
        (None, {}),
        (None, {"scale": 0.3}),
        (RNG.random((L, S)) > 0.3, {}),
        (_randn(H, 1, S), {}),
    ],
    ids=["plain", "scale", "bool mask", "float mask"],
)
def test_sdpa_forward_and_gradients_match_the_cpu_in_fused_kernels(
    device: Device, mask: np.ndarray | None, attrs: dict[str, Any]
) -> None:
    if mask is not None and mask.dtype == bool:
        mask[:, 0] = True  # every row keeps a key
    outs, feeds = _sdpa_step(((B, H, L, E), (B, H, S, E), (B, H, S, EV)), mask, **attrs)
    kinds = _check(outs, feeds, device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds
    assert kinds["matmul"] == 0, kinds
    assert kinds["softmax"] == 0, kinds


def test_causal_attention_with_batch_axes_broadcast(device: Device) -> None:
    """Causal, with k and v shared by the heads (their gradients summed over them)."""
    outs, feeds = _sdpa_step(((B, H, S, E), (B, 1, S, E), (B, 1, S, EV)), None, is_causal=True)
    kinds = _check(outs, feeds, device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds


def test_head_sizes_up_to_the_limit_use_the_wide_tiles(device: Device) -> None:
    """Heads over 32 take the 64-wide tiles (and the backward's 8-row blocks)."""
    outs, feeds = _sdpa_step(
        ((2, 2, 23, 40), (2, 2, 18, 40), (2, 2, 18, 64)), None, is_causal=False
    )
    kinds = _check(outs, feeds, device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds


def test_a_fully_masked_row_is_nan_and_poisons_the_gradients_as_unfused(device: Device) -> None:
    mask = RNG.random((L, S)) > 0.3
    mask[:, 0] = True
    mask[4] = False  # row 4 keeps no key: NaN (PyTorch's), and so are the gradients
    outs, feeds = _sdpa_step(((B, H, L, E), (B, H, S, E), (B, H, S, EV)), mask)
    program = compile(outs, backend="gpu")
    o, dq, dk, dv = (np.asarray(x) for x in program(feeds))
    with np.errstate(invalid="ignore"):  # the CPU's softmax of the masked row
        want = [np.asarray(x) for x in evaluate(outs, feeds, backend="cpu")]
    assert np.isnan(o[:, :, 4]).all()
    assert not np.isnan(np.delete(o, 4, axis=2)).any()
    for got, ref in zip((o, dq, dk, dv), want, strict=True):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert _kinds(program, feeds, device)["attention"] == 1


def test_nan_and_inf_in_the_inputs_propagate_as_unfused(device: Device) -> None:
    g = Graph()
    feeds = {"q": _randn(1, 2, 18, 4), "k": _randn(1, 2, 20, 4), "v": _randn(1, 2, 20, 3)}
    feeds["q"][0, 0, 3, 1] = np.nan  # one row's scores NaN
    feeds["k"][0, 1, 17, 2] = np.inf  # a column of +-inf scores in head 1
    feeds["v"][0, 0, 9, 0] = np.inf  # an infinite value
    q, k, v = (g.input(n, feeds[n].shape) for n in ("q", "k", "v"))
    o = g.apply("scaled_dot_product_attention", (q, k, v), {})
    got = np.asarray(compile([o], backend="gpu")(feeds)[0])
    with np.errstate(invalid="ignore"):
        (want,) = evaluate([o], feeds, backend="cpu")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-5)


def test_a_head_size_over_the_limit_falls_back_to_the_unfused_nodes(device: Device) -> None:
    outs, feeds = _sdpa_step(((1, 2, 9, 80), (1, 2, 11, 80), (1, 2, 11, 3)), None)
    kinds = _check(outs, feeds, device)
    assert kinds["attention"] == 0, kinds
    assert kinds["attention backward"] == 0, kinds
    assert kinds["softmax"] == 1, kinds


def test_more_scores_than_the_limit_fall_back_to_the_unfused_nodes(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attention, "MAX_FUSED_SCORES", B * H * L * S - 1)
    outs, feeds = _sdpa_step(((B, H, L, E), (B, H, S, E), (B, H, S, EV)), None)
    kinds = _check(outs, feeds, device)
    assert kinds["attention"] == 0, kinds
    assert kinds["softmax"] == 1, kinds


def test_the_score_limit_is_read_from_the_environment(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ASGRAD_GPU_ATTENTION_MAX_SCORES`` overrides `MAX_FUSED_SCORES` for a plan:
    under the scores it unfuses, ``none`` lifts the limit."""
    shapes = ((B, H, L, E), (B, H, S, E), (B, H, S, EV))
    monkeypatch.setenv(attention.MAX_SCORES_VARIABLE, str(B * H * L * S - 1))
    outs, feeds = _sdpa_step(shapes, None)
    assert _check(outs, feeds, device)["attention"] == 0
    monkeypatch.setattr(attention, "MAX_FUSED_SCORES", 0)
    monkeypatch.setenv(attention.MAX_SCORES_VARIABLE, "none")
    outs, feeds = _sdpa_step(shapes, None)
    assert _check(outs, feeds, device)["attention"] == 1


@pytest.mark.parametrize("raw", ["-1", "many"])
def test_a_bad_score_limit_in_the_environment_is_an_error(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(attention.MAX_SCORES_VARIABLE, raw)
    with pytest.raises(GpuError, match="ASGRAD_GPU_ATTENTION_MAX_SCORES"):
        attention.max_fused_scores()


def test_attention_weights_read_elsewhere_fall_back_to_the_unfused_nodes(
    device: Device,
) -> None:
    """MultiheadAttention returning its weights: the softmax has another reader."""
    mha = nn.MultiheadAttention(8, 2, batch_first=True, rng=0)
    g = Graph()
    x = g.input("x", (2, 5, 8))
    out, weights = mha(x, x, x)
    assert weights is not None
    feeds = {"x": _randn(2, 5, 8)}
    kinds = _check([out, weights], feeds, device)
    assert kinds["attention"] == 0, kinds
    assert kinds["softmax"] == 1, kinds


def test_dropout_on_the_attention_weights_falls_back_to_the_unfused_nodes(
    device: Device,
) -> None:
    block = nn.SelfAttention(8, 2, dropout=0.5, rng=0)
    g = Graph()
    x = g.input("x", (2, 5, 8))
    program = compile([block(x)], backend="gpu")
    kinds = _kinds(program, {"x": _randn(2, 5, 8)}, device)
    assert kinds["attention"] == 0, kinds
    assert kinds["softmax"] == 1, kinds


def _block_step(backend: str, **options: Any) -> tuple[Any, list[Any], dict[str, np.ndarray]]:
    block = nn.TransformerBlock(16, 2)
    block.initialize(0)
    g = Graph()
    x, y = g.input("x", (2, 17, 16)), g.input("y", (2, 17, 16))
    loss = nn.mse_loss(block(x, **options), y)
    program = nn.SGD(block.parameters(), lr=0.1).compile(loss, backend=backend)
    feeds = {"x": _randn(2, 17, 16), "y": _randn(2, 17, 16)}
    return program, list(block.parameters()), feeds


@pytest.mark.parametrize("options", [{"causal": True}, {}], ids=["causal", "plain"])
def test_transformer_block_step_uses_the_fused_kernels_and_matches_the_cpu(
    device: Device, options: dict[str, Any]
) -> None:
    gpu, gpu_params, feeds = _block_step("gpu", **options)
    cpu, cpu_params, _ = _block_step("cpu", **options)
    for _ in range(2):
        np.testing.assert_allclose(float(gpu(feeds)[0]), float(cpu(feeds)[0]), rtol=1e-4, atol=1e-6)
    for a, b in zip(gpu_params, cpu_params, strict=True):
        np.testing.assert_allclose(a.value, b.value, rtol=1e-4, atol=1e-5)
    kinds = _kinds(gpu, feeds, device)
    # forward: one attention kernel for q k^T, the scale, the mask, softmax and the
    # product with v; backward: two (dQ; dK and dV); the four products are the
    # projections' (qkv, out, two feed-forward) and their six gradient products
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds
    assert kinds["softmax"] == 0, kinds
    assert kinds["matmul"] == 12, kinds


def test_alibi_and_key_padding_are_read_by_the_fused_kernels(device: Device) -> None:
    """SelfAttention's ALiBi bias (a constant) and its key padding mask (a where of a
    bool input broadcast over heads and rows) are the score chain's operands."""
    attn = nn.SelfAttention(16, 2, position="alibi", rng=0)
    g = Graph()
    x, pad = g.input("x", (2, 17, 16)), g.input("pad", (2, 17), "bool")
    y = attn(x, key_padding_mask=pad, causal=True)
    (dx,) = grad((y * y).sum(), [x])
    padding = np.zeros((2, 17), bool)
    padding[1, 12:] = True
    kinds = _check([y, dx], {"x": _randn(2, 17, 16), "pad": padding}, device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds


def test_multihead_attention_without_its_weights_is_fused(device: Device) -> None:
    mha = nn.MultiheadAttention(8, 2, rng=0)
    g = Graph()
    x = g.input("x", (5, 2, 8))
    out, _ = mha(x, x, x, need_weights=False, is_causal=True)
    (dx,) = grad((out * out).sum(), [x])
    kinds = _check([out, dx], {"x": _randn(5, 2, 8)}, device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds


def test_the_fused_step_holds_less_device_memory_than_the_unfused(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No probabilities are stored for the backward: only each row's log-sum-exp."""

    def held() -> int:
        program, _, feeds = _block_step("gpu", causal=True)
        plan = program.memory()
        fixed = plan.parameters + plan.state + plan.inputs
        return int(fixed + program.executable.transient_bytes(feeds))

    fused = held()
    monkeypatch.setattr(attention, "MAX_FUSED_SCORES", 0)
    unfused = held()
    assert fused < unfused


def test_attention_recomputed_for_the_backward_under_a_memory_budget_is_fused(
    device: Device,
) -> None:
    """The smallest memory budget recomputes the probabilities (and q, k, v's views) in
    the backward: that softmax, read only by the backward, is a group of its own (the
    forward kernel again, for the log-sum-exp, then the backward's two)."""
    block = nn.TransformerBlock(16, 2, causal=True, rng=0)
    g = Graph()
    x = g.input("x", (2, 17, 16))
    loss = (block(x) ** 2).sum()
    (dx,) = grad(loss, [x])
    with pytest.raises(MemoryBudgetError) as floor:
        make_schedule([loss, dx], memory_budget=1)
    schedule = make_schedule([loss, dx], memory_budget=floor.value.reachable)
    assert [n.op for n in schedule.nodes].count("softmax") == 2  # recomputed
    feeds = {"x": _randn(2, 17, 16)}
    kinds = count_kinds(build_plan(schedule, feeds, device).commands)
    assert kinds["attention"] == 2, kinds
    assert kinds["attention backward"] == 2, kinds
    assert kinds["softmax"] == 0, kinds
    got = GpuBackend().compile(schedule).run(feeds)
    want = evaluate([loss, dx], feeds, backend="cpu")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_a_gradient_of_the_mask_itself_falls_back_to_the_unfused_nodes(device: Device) -> None:
    """A learned bias: the scores' gradient is read by the bias's gradient too."""
    g = Graph()
    feeds = {"q": _randn(1, 2, 6, 4), "k": _randn(1, 2, 7, 4), "v": _randn(1, 2, 7, 3)}
    feeds["b"], feeds["w"] = _randn(2, 6, 7), _randn(1, 2, 6, 3)
    q, k, v, b, w = (g.input(n, feeds[n].shape) for n in ("q", "k", "v", "b", "w"))
    o = g.apply("scaled_dot_product_attention", (q, k, v, b), {})
    outs = [o, *grad((o * w).sum(), [q, k, v, b])]
    kinds = _check(outs, feeds, device)
    assert kinds["attention backward"] == 0, kinds
    assert kinds["softmax"] == 1, kinds
