"""Tiles whose operands read along K are fetched as 4x4 blocks and stored transposed
(the ``q`` flag): against numpy for every operand layout, scalar and vec4 reads, a
batch, split-K and tile edges, on the test adapter (lavapipe in CI); their names."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.linalg import Epilogue, MatrixView, matmul, matmul_into
from asgrad.tensor.ir import scalar as s

pytestmark = pytest.mark.gpu
Array = np.ndarray

LAYOUTS = list(itertools.product((False, True), (False, True)))  # (A, B) stored transposed


def _view(device: Device, x: Array, transposed: bool) -> MatrixView:
    if transposed:  # stored transposed, read through swapped strides
        return MatrixView(to_gpu(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device)).transpose()
    return MatrixView(to_gpu(x, device))


@pytest.mark.parametrize("transpose", LAYOUTS)
def test_quad_tile_matches_numpy_for_every_layout(
    device: Device, transpose: tuple[bool, bool]
) -> None:
    """64x64_8x4_k16dpqu: 128 threads, 64 blocks of 4x4 per operand tile (half the
    threads fetch, the rest wait); odd sizes read as scalars over a batch with K in
    two uneven pieces (an odd and an even number of K steps), then aligned sizes read
    as vec4 past the tile's edges (67 rows and 70 columns of 64-wide tiles)."""
    rng = np.random.default_rng(21)
    cases = [((2, 67, 37), (2, 37, 70), 2), ((68, 64), (64, 72), 1)]
    for a_shape, b_shape, splits in cases:
        a = rng.standard_normal(a_shape).astype(np.float32)
        b = rng.standard_normal(b_shape).astype(np.float32)
        va, vb = _view(device, a, transpose[0]), _view(device, b, transpose[1])
        got = matmul(va, vb, "64x64_8x4_k16dpqu", splits).numpy()
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"{a_shape}")


@pytest.mark.parametrize(
    ("shapes", "splits"), [(((131, 77), (77, 132)), 1), (((8, 40), (40, 12)), 3)]
)
def test_quad_tile_with_several_blocks_per_thread_matches_numpy(
    device: Device, shapes: tuple[tuple[int, ...], tuple[int, ...]], splits: int
) -> None:
    """128x64_8x8_k32qu, both operands read along K: A's 128 x 32 tile is two 4x4
    blocks per thread, B's one; across a second partial row of tiles, then a product
    much smaller than one tile with K in 3 pieces of one step each."""
    rng = np.random.default_rng(22)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    got = matmul(_view(device, a, False), _view(device, b, True), "128x64_8x8_k32qu", splits)
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_quad_tile_reads_float16_along_k(device: Device) -> None:
    """float16 operands, both read along K as vec4 blocks, batch broadcast, accumulated
    in float32 and rounded once."""
    if "shader-f16" not in device.capabilities.features:
        pytest.skip("the adapter has no shader-f16")
    rng = np.random.default_rng(23)
    a = rng.standard_normal((2, 1, 12, 40)).astype(np.float16)
    b = rng.standard_normal((3, 40, 20)).astype(np.float16)
    got = matmul(_view(device, a, False), _view(device, b, True), "64x64_8x4_k16dpqu", 1)
    want = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.numpy().astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_quad_flag_round_trips_and_needs_blocks_of_32() -> None:
    for name in ("128x256_8x16_k16qu", "64x64_8x4_k16dpqu", "128x128_8x16_k16dqu_w4"):
        t = tiles.tile(name)
        assert t.quad
        assert t.name == name
    assert tiles.tile("128x128_8x16_k16u").quad is False
    assert tiles.tile("64x64_8x4_k16qdpu").name == "64x64_8x4_k16dpqu"  # flags in any order
    for bad in ("48x64_4x4_k8qu", "64x16_4x4_k8q"):
        with pytest.raises(GpuUnsupportedError, match="multiples of 32"):
            tiles.tile(bad)


def test_quad_flag_changes_only_operands_read_along_k() -> None:
    """Where both operands are read along M / N the q tile is its plain twin's kernel;
    where one is read along K it differs from it."""
    quad, plain = tiles.tile("64x64_8x4_k16dpqu"), tiles.tile("64x64_8x4_k16dpu")
    assert tiles.source(quad, "m", "n", True, True) == tiles.source(plain, "m", "n", True, True)
    assert tiles.source(quad, "k", "n", True, True) != tiles.source(plain, "k", "n", True, True)
    assert "transpose(v)" in tiles.source(quad, "m", "k", False, False)


def test_tuner_times_quad_tiles_only_where_an_operand_is_read_along_k(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tuning, "TILES", ("128x128_8x16_k16qu", "128x128_8x16_k16u"))
    monkeypatch.setattr(tuning, "SPLIT_TILES", ("128x128_8x16_k16qu",))
    for layouts in (("k", "k"), ("k", "n"), ("m", "k")):
        timed = tuning.candidates(tuning.Problem(512, 512, 8192, 1, layouts), ("x", 1))
        assert ("128x128_8x16_k16qu", 1) in timed
        assert ("128x128_8x16_k16qu", 4) in timed
    timed = tuning.candidates(tuning.Problem(512, 512, 8192, 1, ("m", "n")), ("x", 1))
    assert not [c for c in timed if "q" in c[0]]
    assert ("128x128_8x16_k16u", 1) in timed


@pytest.mark.parametrize(("n", "splits"), [(72, 1), (72, 2), (70, 1)])
def test_vec4_stores_match_numpy(device: Device, n: int, splits: int) -> None:
    """64x64_8x4_k16dpqsu: rows of C a multiple of 4 long stored as vec4 (whole, and
    the partial products of a split K), past the tile's edges (72 columns of 64-wide
    tiles, 67 rows); rows of 70 are stored as scalars (the same kernel as without s)."""
    rng = np.random.default_rng(24)
    a = rng.standard_normal((2, 67, 40)).astype(np.float32)
    b = rng.standard_normal((2, 40, n)).astype(np.float32)
    got = matmul(_view(device, a, False), _view(device, b, True), "64x64_8x4_k16dpqsu", splits)
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_vec4_stores_run_the_epilogue_per_element(device: Device) -> None:
    """A fused bias and ReLU stored as vec4: each of the 4 outputs through the
    epilogue at its own column."""
    rng = np.random.default_rng(25)
    a = rng.standard_normal((37, 24)).astype(np.float32)
    b = rng.standard_normal((24, 12)).astype(np.float32)
    bias = rng.standard_normal(12).astype(np.float32)
    out = GpuArray.empty((37, 12), np.float32, device)
    expr = s.maximum(s.arg(0) + s.arg(1), 0.0)
    epilogue = Epilogue(expr, [to_gpu(bias, device)])
    va, vb = _view(device, a, False), _view(device, b, False)
    matmul_into(va, vb, out, "64x64_8x4_k16dpqsu", 1, epilogue)
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_vec4_store_flag_changes_only_float32_rows_of_whole_vec4() -> None:
    plain, stored = tiles.tile("64x64_8x4_k16dpqu"), tiles.tile("64x64_8x4_k16dpqsu")
    assert stored.vstore
    assert stored.name == "64x64_8x4_k16dpqsu"
    assert tiles.source(stored, "k", "n", True, True) == tiles.source(plain, "k", "n", True, True)
    half = ("f16", "f16")
    assert tiles.source(stored, "k", "n", True, True, types=half, vec_c=True) == tiles.source(
        plain, "k", "n", True, True, types=half
    )
    assert "C[i / 4u] = vec4<f32>(" in tiles.source(stored, "k", "n", True, True, vec_c=True)
