"""float16 on the GPU against numpy's float16 reference: storage, casts, special values,
per-op rounding of elementwise kernels, float32 accumulation of matmul, reductions and
row programs, and the typed error of a device without ``shader-f16``.

Tolerances: + - * and the casts are exact (WGSL rounds them as numpy does); the other
elementwise primitives widen to f32 and round once, as numpy's float16 loops, within
two float16 steps (``rtol`` 2e-3) where the device's f32 transcendental differs by a
few f32 ulps; accumulated results within two float16 steps as well (f32 sums added in
another order).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, GpuFloat16Error, GpuIntegerOverflowError, to_gpu
from asgrad.gpu.device.pipelines import PipelineCache
from asgrad.gpu.device.source import uses_f16
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.tensor import Graph, Tensor, compile, evaluate
from asgrad.tensor.api.nn_functional import conv2d, layer_norm, max_pool2d

pytestmark = pytest.mark.gpu

RTOL = 2e-3


def _both(outputs: list[Tensor], feeds: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    with np.errstate(all="ignore"):
        cpu = evaluate(outputs, feeds, backend="cpu")
    return cpu, evaluate(outputs, feeds, backend="gpu")


def _close(got: np.ndarray, want: np.ndarray, rtol: float = RTOL, atol: float = 0.0) -> None:
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol, atol)


@pytest.mark.parametrize("n", [1, 3, 5, 1000])
def test_float16_arrays_round_trip_at_odd_lengths(device: Device, n: int) -> None:
    x = (np.arange(n) * 0.37 - 3).astype(np.float16)
    array = to_gpu(x, device)
    assert array.wgsl == "f16"
    assert array.nbytes == 2 * n
    np.testing.assert_array_equal(array.numpy(), x)


def test_casts_follow_numpy_at_overflow_nan_and_infinity(device: Device) -> None:
    values = [70000.0, -70000.0, 65519.0, 65520.0, np.nan, np.inf, -np.inf, 1e-8, 0.1, -0.0]
    g = Graph()
    x = g.input("x", (len(values),))
    i = g.input("i", (4,), "int32")
    half = x.cast("float16")
    outs = [half, half.cast("float32"), i.cast("float16"), half.cast("bool")]
    outs += [g.input("h", (3,), "float16").cast("int32")]
    feeds = {
        "x": np.array(values, np.float32),
        "i": np.array([1, -7, 65504, 70000], np.int32),
        "h": np.array([2.5, -3.75, 1000.0], np.float16),
    }
    cpu, gpu = _both(outs, feeds)
    for want, got in zip(cpu, gpu, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert gpu[0][0] == np.inf
    assert gpu[0][1] == -np.inf
    assert gpu[0][2] == 65504.0
    assert np.isnan(gpu[0][4])
    assert gpu[2][3] == np.inf  # 70000 has no float16


def test_float16_to_int64_checks_its_range_as_float32_does(device: Device) -> None:
    g = Graph()
    h = g.input("h", (4,), "float16")
    i = g.input("i", (3,), "int64")
    one_hot = g.apply("one_hot", [i], {"depth": 4, "dtype": "float16"})
    feeds = {"h": np.array([1.5, -2.5, 65504, -7], np.float16), "i": np.array([0, 3, 1])}
    ints, hot = evaluate([h.cast("int64"), one_hot], feeds, backend="gpu")
    np.testing.assert_array_equal(ints, [1, -2, 65504, -7])
    assert hot.dtype == np.float16
    np.testing.assert_array_equal(hot, np.eye(4, dtype=np.float16)[[0, 3, 1]])
    with pytest.raises(GpuIntegerOverflowError, match="cast"):  # inf has no int64
        evaluate([h.cast("int64")], {"h": np.array([np.inf, 1, 2, 3], np.float16)}, backend="gpu")


def test_arithmetic_rounds_to_float16_per_op_and_overflows_to_inf(device: Device) -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(300) * 100).astype(np.float16)
    b = (rng.standard_normal(300) * 100).astype(np.float16)
    a[:4] = [np.nan, np.inf, -np.inf, 300.0]
    b[:4] = [1.0, 1.0, np.inf, 300.0]
    g = Graph()
    x, y = g.input("a", a.shape, "float16"), g.input("b", b.shape, "float16")
    outs = [x + y, x - y, x * y, -x, abs(x), x.maximum(y), x.minimum(y), x < y, x == y]
    outs += [(x * y).isinf(), (x * 0.5 + 1.0) * 3.0]
    cpu, gpu = _both(outs, {"a": a, "b": b})
    for want, got in zip(cpu, gpu, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)  # bit for bit, NaN where numpy's NaN
    assert gpu[2][3] == np.inf  # 300 * 300 = 90000 > 65504


def test_division_and_transcendental_ops_within_two_float16_steps(device: Device) -> None:
    x = np.linspace(-14.0, 14.0, 513).astype(np.float16)
    y = np.linspace(0.25, 9.0, 513).astype(np.float16)
    g = Graph()
    a, b = g.input("x", x.shape, "float16"), g.input("y", y.shape, "float16")
    outs = [a / b, a.exp(), b.log(), a.tanh(), a.sigmoid(), b.sqrt(), a.sin(), a.gelu()]
    outs += [a.erf(), b**1.5, a.softplus()]
    cpu, gpu = _both(outs, {"x": x, "y": y})
    for want, got in zip(cpu, gpu, strict=True):
        _close(got, want, atol=1e-3 * float(np.nanmax(np.abs(want[np.isfinite(want)]))))
    assert gpu[1][-1] == np.inf  # e**14 is beyond float16: inf, as numpy


@pytest.mark.parametrize(
    ("sa", "sb"),
    [
        ((8, 4096), (4096, 8)),  # deep K: split into float32 partial products
        ((3, 70, 96), (96, 130)),  # a batch sharing B: one taller product
        ((2, 33, 17), (2, 17, 9)),  # odd sizes: scalar reads
        ((64, 64), (64, 64)),  # aligned: vec4 reads
    ],
)
def test_matmul_accumulates_in_float32(
    device: Device, sa: tuple[int, ...], sb: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(1)
    av = rng.standard_normal(sa).astype(np.float16)
    bv = rng.standard_normal(sb).astype(np.float16)
    g = Graph()
    a, b = g.input("a", sa, "float16"), g.input("b", sb, "float16")
    got, got_t = evaluate([a @ b, (b.mT @ a.mT).mT], {"a": av, "b": bv}, backend="gpu")
    want = np.matmul(av.astype(np.float32), bv.astype(np.float32)).astype(np.float16)
    scale = float(np.abs(want.astype(np.float32)).max())
    _close(got, want, atol=1e-3 * scale)
    _close(got_t, want, atol=1e-3 * scale)  # transposed operands: strided reads


def test_matmul_of_ones_counts_past_float16_steps(device: Device) -> None:
    g = Graph()
    a, b = g.input("a", (4, 4096), "float16"), g.input("b", (4096, 2), "float16")
    feeds = {"a": np.ones((4, 4096), np.float16), "b": np.ones((4096, 2), np.float16)}
    (total,) = evaluate([a @ b], feeds, backend="gpu")
    # adding 1 in float16 stops at 2048; the float32 accumulator does not
    np.testing.assert_array_equal(total, np.full((4, 2), 4096.0, np.float16))


def _epilogue_chain(device: Device, dtype: str) -> tuple[np.ndarray, int]:
    """``gelu(x @ w) * 2``, compiled for the GPU: its value and its dispatches per run."""
    rng = np.random.default_rng(2)
    g = Graph()
    x, w = g.input("x", (64, 32), dtype), g.input("w", (32, 48), dtype)
    program = compile([(x @ w).gelu() * 2.0], backend="gpu")
    feeds = {
        "x": rng.standard_normal((64, 32)).astype(dtype),
        "w": rng.standard_normal((32, 48)).astype(dtype),
    }
    program.run(feeds)
    before = device.counter.snapshot()
    (value,) = program.run(feeds)
    return value, (device.counter.snapshot() - before).dispatches


def test_matmul_epilogue_fuses_and_rounds_like_the_unfused_ops(device: Device) -> None:
    half, half_dispatches = _epilogue_chain(device, "float16")
    _, single_dispatches = _epilogue_chain(device, "float32")
    assert half_dispatches == single_dispatches  # the chain is the product's epilogue
    rng = np.random.default_rng(2)
    xv = rng.standard_normal((64, 32)).astype(np.float16)
    wv = rng.standard_normal((32, 48)).astype(np.float16)
    product = np.matmul(xv.astype(np.float32), wv.astype(np.float32)).astype(np.float16)
    g = Graph()
    p = g.input("p", product.shape, "float16")
    (want,) = evaluate([p.gelu() * 2.0], {"p": product}, backend="cpu")
    _close(half, want, atol=1e-3 * float(np.abs(want.astype(np.float32)).max()))


def test_sums_accumulate_in_float32_and_overflow_to_inf(device: Device) -> None:
    g = Graph()
    ones = g.input("ones", (4096, 3), "float16")
    row = g.input("row", (3, 20000), "float16")
    big = g.input("big", (4,), "float16")
    outs = [ones.sum(axis=0), ones.mean(axis=0), row.sum(axis=1), big.sum(), row.var(axis=1)]
    feeds = {
        "ones": np.ones((4096, 3), np.float16),
        "row": np.full((3, 20000), 0.5, np.float16),
        "big": np.array([60000, 60000, 1, 1], np.float16),
    }
    cpu, gpu = _both(outs, feeds)
    np.testing.assert_array_equal(gpu[0], np.full(3, 4096.0, np.float16))
    np.testing.assert_array_equal(gpu[1], np.ones(3, np.float16))
    np.testing.assert_array_equal(gpu[2], np.full(3, 10000.0, np.float16))
    assert gpu[3] == np.inf  # 120002 has no float16
    for want, got in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(got, want)


def test_softmax_and_layer_norm_rows_compute_in_float32(device: Device) -> None:
    rng = np.random.default_rng(3)
    xv = (rng.standard_normal((6, 1000)) * 4).astype(np.float16)
    xv[0, 0] = np.nan
    g = Graph()
    x = g.input("x", xv.shape, "float16")
    cpu, gpu = _both([x.softmax(axis=-1), x.log_softmax(axis=-1), layer_norm(x)], {"x": xv})
    for want, got in zip(cpu, gpu, strict=True):
        assert np.isnan(got[0]).all()  # a NaN in the row: NaN across it, as numpy
        _close(got[1:], want[1:], atol=1e-4)


def test_ops_without_a_float16_kernel_run_through_float32(device: Device) -> None:
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((2, 3, 9, 9)).astype(np.float16)
    wv = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    g = Graph()
    x, w = g.input("x", xv.shape, "float16"), g.input("w", wv.shape, "float16")
    cpu, gpu = _both([max_pool2d(conv2d(x, w, padding=1), 2)], {"x": xv, "w": wv})
    assert gpu[0].dtype == np.float16
    _close(gpu[0], cpu[0], atol=1e-3 * float(np.abs(cpu[0].astype(np.float32)).max()))


class _NoHalfDevice:
    """A wgpu device handle that was not granted shader-f16."""

    features: frozenset[str] = frozenset({"timestamp-query"})

    def create_bind_group_layout(self, **kwargs: Any) -> object:
        return object()

    def create_pipeline_layout(self, **kwargs: Any) -> object:
        return object()


def test_a_device_without_shader_f16_refuses_float16_kernels() -> None:
    cache = PipelineCache(_FakeWgpu(), _NoHalfDevice())
    with pytest.raises(GpuFloat16Error, match=r"shader-f16.*cast float16 values to float32"):
        cache.get(("elementwise",), lambda: "var<storage> a: array<f16>;", ("read",))


class _FakeWgpu:
    class BufferBindingType:
        uniform = "uniform"
        read_only_storage = "read-only-storage"
        storage = "storage"

    class ShaderStage:
        COMPUTE = 4


def test_float32_kernels_need_no_shader_f16() -> None:
    # only f16 outside comments asks for the feature, so a device without it runs float32
    for path in resources.files("asgrad.gpu").joinpath("kernels").iterdir():
        if path.name.endswith(".wgsl") and path.name != "prelude_f16.wgsl":
            assert not uses_f16(path.read_text()), path.name
    tile = tiles.tile("64")
    assert not uses_f16(tiles.source(tile, "k", "n", True, True))
    assert uses_f16(tiles.source(tile, "k", "n", True, True, types=("f16", "f16")))
