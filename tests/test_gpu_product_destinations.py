"""A matmul read only through views stores its result where the views put it
(asgrad.gpu.plan.destinations, the tile kernel's strided destination): attention's
heads merged back after the value product (a transpose, then a reshape merging axes
that are not adjacent), and dq, dk and dv scattered into the gradient of the qkv they
were sliced from, with no view copy launched, on attention left unfused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device, to_gpu
from asgrad.gpu.device.array import GpuArray, Operand, slice_view
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.linalg import Epilogue, MatrixView, matmul_into
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.attention import MAX_SCORES_VARIABLE
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile, evaluate
from asgrad.tensor.ir.scalar import arg

pytestmark = pytest.mark.gpu

# tiles of every size class; T not a multiple of any of them
TILES = [None, "16x16_4x4_k16d", "32x32_4x4_k8", "64x64_8x4_k16dpu", "128x128_8x16_k8u"]


def _check(end: GpuArray, want: np.ndarray, dtype: Any) -> None:
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(end.numpy().astype(np.float32), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    ("variant", "dtype"), [*((t, np.float32) for t in TILES), (None, np.float16)]
)
def test_heads_merged_back_are_stored_through_the_permuted_view(
    device: Device, variant: str | None, dtype: Any
) -> None:
    B, H, T, DH = 2, 3, 19, 8
    rng = np.random.default_rng(0)
    a = rng.standard_normal((B, H, T, T)).astype(dtype)
    b = rng.standard_normal((B, H, T, DH)).astype(dtype)
    end = GpuArray.empty((B, T, H * DH), dtype, device)
    into = Operand(end, (B, T, H, DH), (T * H * DH, H * DH, DH, 1)).permute((0, 2, 1, 3))
    matmul_into(MatrixView(to_gpu(a, device)), MatrixView(to_gpu(b, device)), into, variant)
    want = (a.astype(np.float32) @ b.astype(np.float32)).transpose(0, 2, 1, 3)
    _check(end, want.reshape(B, T, H * DH), dtype)


@pytest.mark.parametrize("variant", [None, "64x64_8x4_k16dpu"])
@pytest.mark.parametrize("piece", [0, 2])
def test_a_slice_of_a_wider_array_is_written_alone(
    device: Device, variant: str | None, piece: int
) -> None:
    """One of q, k and v's gradients into its third of qkv's: the other thirds keep
    what they held (the store stays inside its slice, at its offset)."""
    B, H, T, DH = 2, 2, 13, 4
    D = H * DH
    rng = np.random.default_rng(piece)
    a = rng.standard_normal((B, H, T, T)).astype(np.float32)
    b = rng.standard_normal((B, H, T, DH)).astype(np.float32)
    before = rng.standard_normal((B, T, 3 * D)).astype(np.float32)
    end = to_gpu(before, device)
    region = slice_view(
        Operand.of(end), (slice(None), slice(None), slice(piece * D, (piece + 1) * D))
    )
    into = Operand(end, (B, T, H, DH), (*region.strides[:2], DH, 1), region.offset)
    matmul_into(
        MatrixView(to_gpu(a, device)),
        MatrixView(to_gpu(b, device)),
        into.permute((0, 2, 1, 3)),
        variant,
    )
    want = before.copy()
    want[:, :, piece * D : (piece + 1) * D] = (a @ b).transpose(0, 2, 1, 3).reshape(B, T, D)
    _check(end, want, np.float32)


@pytest.mark.parametrize("layouts", [("k", "n"), ("m", "n"), ("k", "k"), ("m", "k")])
def test_every_operand_layout_stores_through_the_view(
    device: Device, layouts: tuple[str, str]
) -> None:
    """A transposed operand (A contiguous along M, B along K) reads through its own
    strides; the store through the destination's is the same for each."""
    B, H, T, DH = 2, 2, 11, 8
    rng = np.random.default_rng(4)
    a = rng.standard_normal((B, H, T, T)).astype(np.float32)
    b = rng.standard_normal((B, H, T, DH)).astype(np.float32)
    va = MatrixView(to_gpu(np.ascontiguousarray(a.swapaxes(-1, -2)), device)).transpose()
    vb = MatrixView(to_gpu(np.ascontiguousarray(b.swapaxes(-1, -2)), device)).transpose()
    if layouts[0] == "k":
        va = MatrixView(to_gpu(a, device))
    if layouts[1] == "n":
        vb = MatrixView(to_gpu(b, device))
    end = GpuArray.empty((B, T, H * DH), np.float32, device)
    into = Operand(end, (B, T, H, DH), (T * H * DH, H * DH, DH, 1)).permute((0, 2, 1, 3))
    matmul_into(va, vb, into)
    want = (a @ b).transpose(0, 2, 1, 3).reshape(B, T, H * DH)
    np.testing.assert_allclose(end.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("splits", [1, 4])
def test_a_transposed_destination_of_a_deep_product_is_not_split(
    device: Device, splits: int
) -> None:
    """A column stride other than 1, and K deep enough to be split: a strided
    destination takes the product whole (partial products would need a sum through the
    view), whatever splits are asked for."""
    M, K, N = 24, 2048, 20
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    end = GpuArray.empty((N, M), np.float32, device)
    into = Operand.of(end).permute((1, 0))
    matmul_into(MatrixView(to_gpu(a, device)), MatrixView(to_gpu(b, device)), into, None, splits)
    np.testing.assert_allclose(end.numpy(), (a @ b).T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("variant", [None, "32x32_4x4_k8"])
def test_a_batch_folded_into_the_rows_is_stored_through_the_view(
    device: Device, variant: str | None
) -> None:
    """x (B, T, K) @ w (K, N), one taller product (the batch folded into M), stored
    batch-minor: the flat row walks the view's batch and row strides."""
    B, T, K, N = 3, 10, 16, 12
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, T, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    end = GpuArray.empty((T, B, N), np.float32, device)
    into = Operand.of(end).permute((1, 0, 2))
    matmul_into(MatrixView(to_gpu(x, device)), MatrixView(to_gpu(w, device)), into, variant)
    np.testing.assert_allclose(end.numpy(), (x @ w).transpose(1, 0, 2), rtol=1e-5, atol=1e-5)


def test_a_strided_destination_takes_no_second_output_nor_pieces(device: Device) -> None:
    a = to_gpu(np.ones((4, 8), np.float32), device)
    b = to_gpu(np.ones((8, 6), np.float32), device)
    into = Operand.of(GpuArray.empty((6, 4), np.float32, device)).permute((1, 0))
    second = Epilogue(arg(0), [], GpuArray.empty((4, 6), np.float32, device))
    with pytest.raises(GpuUnsupportedError, match="second output"):
        matmul_into(MatrixView(a), MatrixView(b), into, epilogue=second)
    with pytest.raises(GpuUnsupportedError, match="summed product"):
        matmul_into(MatrixView(a), MatrixView(b), into, sum_pieces=False)


# -- in a plan: attention left unfused -----------------------------------------------------
B, T, H, DH = 2, 19, 3, 4
D = H * DH


def _heads(x: Tensor) -> Tensor:
    return x.reshape(B, T, H, DH).transpose(0, 2, 1, 3)


def _step(v_apart: bool, dtype: str = "float32") -> tuple[list[Tensor], dict[str, np.ndarray]]:
    """A causal self-attention over heads sliced from one qkv (v from its own input
    when ``v_apart``), merged back and projected; the loss's gradients."""
    rng = np.random.default_rng(3)
    g = Graph()
    feeds = {
        "qkv": rng.standard_normal((B, T, 3 * D)).astype(dtype),
        "v": rng.standard_normal((B, T, D)).astype(dtype),
        "w": rng.standard_normal((D, D)).astype(dtype),
        "c": rng.standard_normal((B, T, D)).astype(dtype),
    }
    qkv, w = g.input("qkv", (B, T, 3 * D), dtype), g.input("w", (D, D), dtype)
    c = g.input("c", (B, T, D), dtype)
    q, k, v = (_heads(qkv[:, :, i * D : (i + 1) * D]) for i in range(3))
    inputs = [qkv, w]
    if v_apart:
        v_in = g.input("v", (B, T, D), dtype)
        v, inputs = _heads(v_in), [qkv, w, v_in]
    else:
        feeds.pop("v")
    mask = np.triu(np.full((T, T), -1e4, dtype=dtype), 1)
    att = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(DH)) + g.constant(mask)
    y = (att.softmax(-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = y @ w
    loss = (out * c).sum()
    return [out, *grad(loss, inputs)], feeds


def _run(
    outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device, tol: float = 1e-5
) -> Any:
    program = compile(outs, backend="gpu")
    got = program(feeds)
    want = evaluate(outs, feeds, backend="cpu")
    for a, b in zip(got, want, strict=True):
        a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
        scale = 1.0 if tol <= 1e-5 else float(np.abs(b32).max())  # float16: of the largest
        np.testing.assert_allclose(a32, b32, rtol=10 * tol, atol=tol * scale)
    schedule = program.executable.schedule  # type: ignore[attr-defined]  # the GPU's
    return count_kinds(build_plan(schedule, feeds, device).commands)


def test_unfused_attention_merges_heads_and_qkv_gradients_without_copies(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_SCORES_VARIABLE, "0")  # attention as products and a softmax
    kinds = _run(*_step(v_apart=False), device)
    assert kinds["attention"] == kinds["attention backward"] == 0, kinds
    # before: the merge, and dq, dk, dv each copied into qkv's gradient (4 view copies)
    assert kinds["view copy"] == 0, kinds
    assert kinds["fill"] == 0, kinds  # the three pieces cover qkv's gradient


def test_unfused_gradients_that_do_not_cover_the_sum_still_match(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_SCORES_VARIABLE, "0")
    kinds = _run(*_step(v_apart=True), device)
    assert kinds["attention"] == 0, kinds
    # the merge is stored in place; q's and k's gradients fill two thirds of qkv's: the
    # sum is zeros and copies
    assert kinds["view copy"] >= 1, kinds


def test_unfused_float16_attention_stores_its_products_through_their_views(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mixed precision's float16 products: the same destinations, of float16."""
    monkeypatch.setenv(MAX_SCORES_VARIABLE, "0")
    kinds = _run(*_step(v_apart=False, dtype="float16"), device, tol=1e-2)
    assert kinds["attention"] == 0, kinds
    assert kinds["view copy"] == 0, kinds
