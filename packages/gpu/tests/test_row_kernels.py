"""The GPU row kernel rendered from row programs (`asgrad.gpu.lowering.rows`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from asgrad.gpu import Device, GpuError, to_gpu
from asgrad.gpu.lowering import rows as row_kernels
from asgrad.gpu.lowering.norm import (
    batch_norm,
    batch_norm_backward,
    layer_norm,
    layer_norm_backward,
    softmax,
)
from asgrad.gpu.lowering.rows import ROW_ELEMENTS_VARIABLE, kernel_source, lanes_for
from asgrad.tensor import get_op

pytestmark = pytest.mark.gpu


def test_independent_sums_share_one_tree_reduction() -> None:
    rows = get_op("layer_norm_backward").rows
    assert rows is not None
    source = kernel_source(rows(2, 3, normalized_shape=(8,), eps=1e-5))
    # four stages in three passes: the variance and mean(g * w) share the second
    assert source.count("for (var s = 128u;") == 3
    assert "p1[li] = p1[li] + p1[li + s];" in source


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 2)])
def test_batch_norm_channels_match_the_numpy_kernel(device: Device, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    got = batch_norm(to_gpu(x, device), 1e-5, to_gpu(w, device), to_gpu(b, device)).numpy()
    want = get_op("batch_norm").kernel(x, w, b, eps=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    dx = batch_norm_backward(to_gpu(g, device), to_gpu(x, device), 1e-5, to_gpu(w, device))
    want = get_op("batch_norm_backward").kernel(g, x, w, eps=1e-5)
    np.testing.assert_allclose(dx.numpy(), want, rtol=1e-4, atol=1e-5)


def test_a_layer_norm_gradient_over_two_axes_matches_the_numpy_kernel(device: Device) -> None:
    rng = np.random.default_rng(9)
    x, g = (rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((4, 5)).astype(np.float32)
    got = layer_norm_backward(to_gpu(g, device), to_gpu(x, device), 2, 1e-5, to_gpu(w, device))
    want = get_op("layer_norm_backward").kernel(g, x, w, normalized_shape=(4, 5), eps=1e-5)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_short_rows_share_a_workgroup() -> None:
    assert [lanes_for(n) for n in (1, 256, 257, 512, 1024, 2048, 4096)] == [
        32, 32, 64, 64, 128, 256, 256,
    ]  # fmt: skip
    rows = get_op("softmax").rows
    assert rows is not None
    source = kernel_source(rows(4, 3, axis=-1), lanes=32)
    assert "for (var s = 16u;" in source
    assert "k += 32u" in source


def test_a_kept_row_is_loaded_from_memory_once() -> None:
    """Softmax's three passes over the row (max, sum, output) load each element once,
    into a register of its own (no private array), where each invocation keeps its
    elements; three times where not."""
    rows = get_op("softmax").rows
    assert rows is not None
    kept = kernel_source(rows(4, 3, axis=-1), lanes=32, flat=True, cache=8)
    assert [kept.count(f"in0[at{j}]") for j in range(8)] == [1] * 8
    assert "array<f32, 8>" not in kept
    assert kernel_source(rows(4, 3, axis=-1), lanes=32, flat=True).count("in0[at]") == 3


def test_subgroups_combine_a_row_without_a_tree_in_workgroup_memory() -> None:
    rows = get_op("softmax").rows
    assert rows is not None
    source = kernel_source(rows(4, 3, axis=-1), lanes=32, flat=True, cache=8, subgroups=True)
    assert "subgroupShuffleXor(t0, o)" in source
    assert "for (var s = " not in source
    assert "subgroupShuffleXor" not in kernel_source(
        rows(4, 3, axis=-1), lanes=32, flat=True, cache=8
    )


@pytest.fixture(params=["subgroups", "workgroup memory"])
def lanes_combine(request: pytest.FixtureRequest, device: Device) -> Iterator[str]:
    """How a row's lanes combine their partial results: subgroup shuffles (where the
    device has the ``subgroup`` feature), or a tree in workgroup memory (the device's
    capabilities without it: the kernels a device without subgroups gets)."""
    caps = device.capabilities
    if request.param == "subgroups" and not caps.subgroups:
        pytest.skip("the device has no subgroup feature")
    if request.param == "subgroups":
        yield request.param
        return
    plain = dataclasses.replace(caps, features=tuple(f for f in caps.features if f != "subgroup"))
    device.capabilities = plain
    try:
        yield request.param
    finally:
        device.capabilities = caps


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, at NaN and infinities
@pytest.mark.parametrize("rows", [1, 9, 13])
@pytest.mark.parametrize("length", [1, 5, 256, 257, 513, 2100, 4100])
def test_rows_of_any_length_and_count_match_the_numpy_kernels(
    device: Device, rows: int, length: int, lanes_combine: str
) -> None:
    """Several rows a workgroup (a last workgroup part empty), rows shorter than its
    lanes or longer than their elements per pass, kept by the invocations or (4100)
    too long to keep, NaN and infinities in rows: softmax, log-softmax, layer norm
    and its gradient agree with numpy, the lanes combined either way."""
    rng = np.random.default_rng(rows * length)
    x = (rng.standard_normal((rows, length)) * 4).astype(np.float32)
    if rows > 1:
        x[0, length // 2] = np.nan
        x[-1, -1] = np.inf
        x[-2, 0] = -np.inf
    _check_rows(device, rng, x, logs=(False, True))


def _check_rows(
    device: Device, rng: np.random.Generator, x: np.ndarray, logs: tuple[bool, ...]
) -> None:
    """Softmax (and log-softmax where ``logs`` asks), layer norm and its gradient of the
    rows of ``x`` on ``device`` against the numpy kernels."""
    rows, length = int(x.shape[0]), int(x.shape[1])
    g = rng.standard_normal((rows, length)).astype(np.float32)
    w = rng.standard_normal(length).astype(np.float32)
    gx, gg, gw = (to_gpu(a, device) for a in (x, g, w))
    for log in logs:
        want = get_op("log_softmax" if log else "softmax").kernel(x, axis=-1)
        np.testing.assert_allclose(softmax(gx, -1, log).numpy(), want, rtol=1e-5, atol=1e-6)
    want = get_op("layer_norm").kernel(x, w, w, normalized_shape=(length,), eps=1e-5)
    got = layer_norm(gx, 1, 1e-5, gw, gw).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    want = get_op("layer_norm_backward").kernel(g, x, w, normalized_shape=(length,), eps=1e-5)
    got = layer_norm_backward(gg, gx, 1, 1e-5, gw).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, at NaN and infinities
@pytest.mark.parametrize("min_lanes", [4, 8, 16])
def test_rows_of_fewer_lanes_than_a_subgroup_match_the_numpy_kernels(
    device: Device, monkeypatch: pytest.MonkeyPatch, lanes_combine: str, min_lanes: int
) -> None:
    """Rows of 4, 8 or 16 lanes (`MIN_LANES` lowered; 32 rows or more a workgroup):
    where one subgroup holds a row's lanes (lavapipe's subgroups are 8 wide, an H200's
    32, its softmax rows of 256 taking 32 lanes) the shuffles alone combine them, no
    workgroup memory; where not, the row's subgroups meet in workgroup memory."""
    monkeypatch.setattr(row_kernels, "MIN_LANES", min_lanes)
    rng = np.random.default_rng(min_lanes)
    for length in (1, 5, min_lanes * 8, min_lanes * 8 + 1):
        x = (rng.standard_normal((37, length)) * 4).astype(np.float32)
        x[3, length // 2] = np.nan
        x[-1, -1] = np.inf
        _check_rows(device, rng, x, logs=(False,))


def test_the_elements_per_lane_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ROW_ELEMENTS_VARIABLE, "1")
    assert (lanes_for(256), lanes_for(100)) == (256, 128)
    for raw in ("0", "eight"):
        monkeypatch.setenv(ROW_ELEMENTS_VARIABLE, raw)
        with pytest.raises(GpuError, match=ROW_ELEMENTS_VARIABLE):
            lanes_for(256)


def test_rows_with_strided_elements_match_the_numpy_kernels(device: Device) -> None:
    """A softmax over a middle axis (its elements one stride apart) and a batch norm
    (its rows' elements in blocks: not one stride apart), several rows a workgroup."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 40, 5)) * 3).astype(np.float32)
    want = get_op("softmax").kernel(x, axis=1)
    np.testing.assert_allclose(softmax(to_gpu(x, device), 1).numpy(), want, rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((7, 11, 6)).astype(np.float32)
    w, b = rng.standard_normal(11).astype(np.float32), rng.standard_normal(11).astype(np.float32)
    got = batch_norm(to_gpu(x, device), 1e-5, to_gpu(w, device), to_gpu(b, device)).numpy()
    want = get_op("batch_norm").kernel(x, w, b, eps=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
