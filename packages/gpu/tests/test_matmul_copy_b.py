"""Tiles that copy a B read along K into a contiguous K x N array before the product
(the ``c`` flag; the tuner's `COPY_TILES`): against numpy for each layout, batch and
broadcast, float16 and a fused epilogue, on the test adapter (lavapipe in CI)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.linalg import Epilogue, MatrixView, matmul, matmul_into
from asgrad.tensor.ir import scalar as s

pytestmark = pytest.mark.gpu
Array = np.ndarray

# the smallest c tile of 8x16 outputs (the tuner's are 128x256 and 128x128: the same
# copy, a larger kernel to compile)
TILE = "64x64_8x8_k8cu"


def _view(device: Device, x: Array, transposed: bool) -> MatrixView:
    if transposed:  # stored transposed, read through swapped strides
        return MatrixView(to_gpu(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device)).transpose()
    return MatrixView(to_gpu(x, device))


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "transpose", "copies"),
    [
        ((67, 37), (37, 70), (False, True), 1),  # x @ W^T: B copied, read as vec4 after
        ((2, 33, 20), (20, 17), (True, True), 1),  # A along M; B shared over the batch
        ((3, 9, 30), (3, 30, 12), (False, True), 1),  # a batch of transposed B
        ((40, 64), (64, 36), (False, False), 0),  # B read along N: no copy
    ],
)
def test_copied_b_matches_numpy(
    device: Device,
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    transpose: tuple[bool, bool],
    copies: int,
) -> None:
    rng = np.random.default_rng(31)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    va, vb = _view(device, a, transpose[0]), _view(device, b, transpose[1])
    before = device.counter.dispatches
    got = matmul(va, vb, TILE, 1)
    assert device.counter.dispatches - before == 1 + copies
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_copied_b_with_split_k_float16_and_an_epilogue(device: Device) -> None:
    rng = np.random.default_rng(32)
    a = rng.standard_normal((24, 300)).astype(np.float32)
    b = rng.standard_normal((300, 20)).astype(np.float32)
    got = matmul(_view(device, a, False), _view(device, b, True), TILE, 3).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)
    bias = rng.standard_normal(20).astype(np.float32)
    out = GpuArray.empty((24, 20), np.float32, device)
    epilogue = Epilogue(s.maximum(s.arg(0) + s.arg(1), 0.0), [to_gpu(bias, device)])
    matmul_into(_view(device, a, False), _view(device, b, True), out, TILE, 1, epilogue)
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-3)
    if "shader-f16" in device.capabilities.features:
        h, w = a[:, :40].astype(np.float16), b[:40].astype(np.float16)
        got16 = matmul(_view(device, h, False), _view(device, w, True), TILE, 1).numpy()
        want = (h.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
        assert got16.dtype == np.float16
        np.testing.assert_allclose(got16.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_copy_flag_round_trips_and_the_tuner_times_it_where_b_is_read_along_k() -> None:
    t = tiles.tile("128x256_8x16_k8cu")
    assert t.copy_b
    assert t.name == "128x256_8x16_k8cu"
    assert not tiles.tile("128x256_8x16_k8u").copy_b
    copy = {(name, 1) for name in tuning.COPY_TILES}
    for layouts in (("k", "k"), ("m", "k")):
        problem = tuning.Problem(8192, 1536, 512, 1, layouts)
        assert copy <= set(tuning.candidates(problem, ("x", 1)))
    for problem in (
        tuning.Problem(8192, 1536, 512, 1, ("k", "n")),  # nothing to copy
        tuning.Problem(8192, 1536, 512, 1, ("k", "k"), kind="conv_forward"),  # gathered
    ):
        assert not copy & set(tuning.candidates(problem, ("x", 1)))
