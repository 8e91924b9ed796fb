"""Attention of a float16 graph as one kernel on the GPU (``attention_forward_f16``):
the forward of ``scaled_dot_product_attention``, ``MultiheadAttention`` and a
``TransformerBlock`` compiled with ``precision="mixed"`` (float16 products around a
float32 softmax whose probabilities are rounded to float16 before the product with v)
matches the CPU's float16 reference, masks, fully masked rows and NaN and infinite
inputs included; what the kernel does not take falls back to the unfused nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.gpu.plan import attention, build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(0)

# test_gpu_float16's tolerance: of the largest entry, a float16 step or two (the GPU's
# f32 exp and sums in another order may round a value one step apart)
RTOL = 2e-3

B, H, L, S, E, EV = 2, 3, 19, 21, 5, 7  # L, S not multiples of the kernel's 16


def _randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _sdpa(
    shapes: tuple[tuple[int, ...], ...], mask: np.ndarray | None, **attrs: Any
) -> tuple[Tensor, dict[str, np.ndarray]]:
    """SDPA's output (float32 inputs q, k, v, and the mask)."""
    g = Graph()
    qs, ks, vs = shapes
    feeds = {"q": _randn(*qs), "k": _randn(*ks), "v": _randn(*vs)}
    ins = [g.input(n, feeds[n].shape) for n in ("q", "k", "v")]
    if mask is not None:
        feeds["m"] = mask
        ins.append(g.input("m", mask.shape, "bool" if mask.dtype == bool else "float32"))
    return g.apply("scaled_dot_product_attention", tuple(ins), attrs), feeds


def _run(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> Any:
    """The mixed GPU run, the mixed CPU run and the GPU plan's dispatch kinds."""
    program: Any = compile(outs, backend="gpu", precision="mixed")
    got = [np.asarray(x) for x in program(feeds)]
    # the CPU's softmax of a fully masked row, a score rounded beyond float16
    with np.errstate(invalid="ignore", over="ignore"):
        want = [np.asarray(x) for x in compile(outs, backend="cpu", precision="mixed")(feeds)]
    kinds = count_kinds(build_plan(program.executable.schedule, feeds, device).commands)
    return got, want, kinds


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    scale = float(np.abs(want[finite]).max())
    np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=RTOL * scale)


@pytest.mark.parametrize(
    ("shapes", "mask", "attrs"),
    [
        (((B, H, L, E), (B, H, S, E), (B, H, S, EV)), None, {}),
        (((B, H, L, E), (B, H, S, E), (B, H, S, EV)), None, {"scale": 0.3}),
        (((B, H, L, E), (B, H, S, E), (B, H, S, EV)), RNG.random((L, S)) > 0.3, {}),
        (((B, H, L, E), (B, H, S, E), (B, H, S, EV)), _randn(H, 1, S), {}),
        (((B, H, S, E), (B, 1, S, E), (B, 1, S, EV)), None, {"is_causal": True}),
        (((2, 2, 23, 40), (2, 2, 18, 40), (2, 2, 18, 64)), None, {}),
    ],
    ids=["plain", "scale", "bool mask", "float mask", "causal broadcast", "wide heads"],
)
def test_mixed_sdpa_forward_matches_the_float16_reference_in_one_kernel(
    device: Device,
    shapes: tuple[tuple[int, ...], ...],
    mask: np.ndarray | None,
    attrs: dict[str, Any],
) -> None:
    if mask is not None and mask.dtype == bool:
        mask[:, 0] = True  # every row keeps a key
    out, feeds = _sdpa(shapes, mask, **attrs)
    (got,), (want,), kinds = _run([out], feeds, device)
    _close(got, want)
    assert kinds["attention"] == 1, kinds
    assert kinds["matmul"] == 0, kinds
    assert kinds["softmax"] == 0, kinds


def test_the_probabilities_are_rounded_to_float16_before_the_product(device: Device) -> None:
    """11 equal scores: each probability 1/11 rounds to float16 below it, and the output
    (v all ones) is 11 of them summed, 0.9995 in float16, where the probabilities kept in
    float32 (an online softmax) would give 1."""
    g = Graph()
    feeds = {"q": _randn(1, 1, 2, 3), "k": np.zeros((1, 1, 11, 3), np.float32)}
    feeds["v"] = np.ones((1, 1, 11, 2), np.float32)
    ins = [g.input(n, x.shape) for n, x in feeds.items()]
    out = g.apply("scaled_dot_product_attention", tuple(ins), {})
    (got,), (want,), kinds = _run([out], feeds, device)
    p16 = np.float16(np.float32(1) / np.float32(11))
    expected = np.float32(np.float16(np.float32(p16) * 11))
    assert expected < 1.0
    np.testing.assert_array_equal(want, np.full((1, 1, 2, 2), expected))
    np.testing.assert_array_equal(got, want)
    assert kinds["attention"] == 1, kinds


def test_a_fully_masked_row_is_nan_as_the_unfused_softmax_makes_it(device: Device) -> None:
    mask = RNG.random((L, S)) > 0.3
    mask[:, 0] = True
    mask[4] = False  # row 4 keeps no key: NaN, as the CPU's softmax makes it
    out, feeds = _sdpa(((B, H, L, E), (B, H, S, E), (B, H, S, EV)), mask)
    (got,), (want,), kinds = _run([out], feeds, device)
    assert np.isnan(got[:, :, 4]).all()
    assert not np.isnan(np.delete(got, 4, axis=2)).any()
    _close(got, want)
    assert kinds["attention"] == 1, kinds


def test_nan_and_inf_in_the_inputs_propagate_as_unfused(device: Device) -> None:
    g = Graph()
    feeds = {"q": _randn(1, 2, 18, 4), "k": _randn(1, 2, 20, 4), "v": _randn(1, 2, 20, 3)}
    feeds["q"][0, 0, 3, 1] = np.nan  # one row's scores NaN
    feeds["k"][0, 1, 17, 2] = np.inf  # a column of +-inf scores in head 1
    feeds["v"][0, 0, 9, 0] = np.inf  # an infinite value
    ins = [g.input(n, feeds[n].shape) for n in ("q", "k", "v")]
    out = g.apply("scaled_dot_product_attention", tuple(ins), {})
    (got,), (want,), kinds = _run([out], feeds, device)
    assert np.isnan(want).any()
    assert np.isinf(want).any()
    _close(got, want)
    assert kinds["attention"] == 1, kinds


def test_scores_beyond_float16_round_to_inf_as_the_product_stores_them(device: Device) -> None:
    """q k^T of 2**16 overflows float16: the row's max is inf, and the row is NaN."""
    feeds = {"q": np.zeros((1, 1, 3, 2), np.float32), "k": _randn(1, 1, 5, 2)}
    feeds["v"] = _randn(1, 1, 5, 2)
    feeds["q"][0, 0, 1] = [256.0, 0.0]
    feeds["k"][0, 0, 2] = [256.0, 0.0]
    g = Graph()
    ins = [g.input(n, feeds[n].shape) for n in ("q", "k", "v")]
    out = g.apply("scaled_dot_product_attention", tuple(ins), {"scale": 1.0})
    (got,), (want,), kinds = _run([out], feeds, device)
    assert np.isnan(want[0, 0, 1]).all()
    _close(got, want)
    assert kinds["attention"] == 1, kinds


def test_multihead_attention_and_a_transformer_block_forward_are_fused(device: Device) -> None:
    g = Graph()
    x = g.input("x", (2, 9, 16))
    mha = nn.MultiheadAttention(16, 4, batch_first=True, rng=0)
    out, _ = mha(x, x, x, need_weights=False, is_causal=True)
    block = nn.TransformerBlock(16, 4)
    block.initialize(0)
    y = block(x)
    (a, b), (want_a, want_b), kinds = _run([out, y], {"x": _randn(2, 9, 16)}, device)
    _close(a, want_a)
    _close(b, want_b)
    assert kinds["attention"] == 2, kinds
    assert kinds["softmax"] == 0, kinds


def test_a_backward_reading_the_probabilities_keeps_attention_unfused(device: Device) -> None:
    """The mixed backward reads the float32 probabilities and recomputes the softmax of
    the float16 scores: no float16 backward kernel yet, so the nodes run unfused."""
    g = Graph()
    feeds = {"q": _randn(B, H, L, E), "k": _randn(B, H, S, E), "v": _randn(B, H, S, EV)}
    q, k, v = (g.input(n, feeds[n].shape) for n in ("q", "k", "v"))
    out = g.apply("scaled_dot_product_attention", (q, k, v), {})
    (dq,) = grad((out * out).sum(), [q])
    got, want, kinds = _run([out, dq], feeds, device)
    for a, b in zip(got, want, strict=True):
        _close(a, b)
    assert kinds["attention"] == 0, kinds
    assert kinds["softmax"] >= 1, kinds


def test_more_scores_than_the_limit_fall_back_to_the_unfused_nodes(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attention, "MAX_FUSED_SCORES", B * H * L * S - 1)
    out, feeds = _sdpa(((B, H, L, E), (B, H, S, E), (B, H, S, EV)), None)
    (got,), (want,), kinds = _run([out], feeds, device)
    _close(got, want)
    assert kinds["attention"] == 0, kinds
    assert kinds["softmax"] == 1, kinds


def test_a_head_size_over_the_limit_falls_back_to_the_unfused_nodes(device: Device) -> None:
    out, feeds = _sdpa(((1, 2, 9, 80), (1, 2, 11, 80), (1, 2, 11, 3)), None)
    (got,), (want,), kinds = _run([out], feeds, device)
    _close(got, want)
    assert kinds["attention"] == 0, kinds
