"""The speed-deciding kernels against numpy: matmul, elementwise, reductions, rows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.device.array import Operand
from asgrad.gpu.lowering.elementwise import ITEMS_FROM, elementwise, expression
from asgrad.gpu.lowering.linalg import MatrixView
from asgrad.gpu.lowering.linalg import matmul as gpu_matmul
from asgrad.gpu.lowering.norm import layer_norm, softmax
from asgrad.gpu.lowering.reduction import reduce_axis

pytestmark = pytest.mark.gpu
Array = np.ndarray


def _op_wgsl(op: str) -> str:
    """The WGSL of a float32 op's expression, its attributes at their defaults."""
    wgsl = expression(op, {}, ["f32"], "float32")
    assert wgsl is not None
    return wgsl


def _close(got: Array, want: Array, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("variant", ["128", "64", "32"])
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((5, 7), (7, 3)),
        ((129, 9), (9, 131)),  # not multiples of any tile
        ((2, 33, 17), (17, 65)),  # batch broadcast against a matrix
        ((3, 1, 16, 9), (4, 9, 8)),  # batch dims broadcast both ways
        ((1, 1), (1, 1)),
    ],
)
@pytest.mark.parametrize("transpose", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_matches_numpy(
    device: Device,
    variant: str,
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    transpose: tuple[bool, bool],
) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)

    def view(x: Array, t: bool) -> MatrixView:
        if t:  # store transposed, read back through swapped strides
            return MatrixView(to_gpu(np.swapaxes(x, -1, -2).copy(), device)).transpose()
        return MatrixView(to_gpu(x, device))

    got = gpu_matmul(view(a, transpose[0]), view(b, transpose[1]), variant).numpy()
    _close(got, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_vectors_follow_numpy(device: Device) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    assert gpu_matmul(to_gpu(a, device), to_gpu(v, device)).shape == (2,)
    _close(gpu_matmul(to_gpu(a, device), to_gpu(v, device)).numpy(), a @ v)
    _close(gpu_matmul(to_gpu(v, device), to_gpu(v, device)).numpy(), v @ v)


def test_elementwise_broadcasts_through_strides(device: Device) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    y = rng.standard_normal((3, 1)).astype(np.float32)
    s = np.float32(2.5).reshape(())
    got = elementwise("x0 * x1 + x2", [to_gpu(x, device), to_gpu(y, device), to_gpu(s)])
    _close(got.numpy(), x * y + s)


def test_elementwise_reads_permuted_views(device: Device) -> None:
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    view = Operand.of(to_gpu(x, device)).permute((2, 0, 1))
    _close(elementwise("x0", [view]).numpy(), x.transpose(2, 0, 1))


def test_elementwise_launch_over_65535_workgroups_is_folded(device: Device) -> None:
    n = 65_535 * 256 + 1000  # a strided read: one element per invocation
    x = np.ones((2, n // 2), np.float32)
    view = Operand.of(to_gpu(x, device)).permute((1, 0))
    out = elementwise("x0 * 2.0", [view]).numpy()
    assert out.shape == (n // 2, 2)
    assert out[-1, -1] == 2.0
    assert float(out.sum()) == 2.0 * n


@pytest.mark.parametrize("n", [ITEMS_FROM, 3 * ITEMS_FROM + 7])
def test_elementwise_over_many_elements_computes_several_per_invocation(
    device: Device, n: int
) -> None:
    """Contiguous operands of many elements: each invocation computes `ITEMS` of them,
    the last invocations past the end storing nothing; single values, a row and a
    column broadcast over a matrix, integers, float16 and an input that is the output's
    own buffer (in place) too."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    gx, gy = to_gpu(x, device), to_gpu(y, device)
    s = to_gpu(np.float32(2.5).reshape(()), device)
    _close(elementwise("x0 * x2 + x1", [gx, gy, s]).numpy(), x * np.float32(2.5) + y, 0, 0)
    i = rng.integers(-1000, 1000, n).astype(np.int32)
    got = elementwise("x0 * 3i", [to_gpu(i, device)], np.int32).numpy()
    np.testing.assert_array_equal(got, i * 3)
    bias = rng.standard_normal(1024).astype(np.float32)
    rows = rng.standard_normal(n // 1024).astype(np.float32)
    m = n // 1024 * 1024
    gb, gr = to_gpu(bias, device), to_gpu(rows[:, None], device)
    xm = to_gpu(x[:m].reshape(-1, 1024), device)
    got = elementwise("x0 + x1 * x2", [xm, gb, gr]).numpy()  # a bias, a column
    _close(got, x[:m].reshape(-1, 1024) + bias * rows[:, None], 1e-6, 1e-6)
    h = x.astype(np.float16)
    got = elementwise("x0 * x0", [to_gpu(h, device)], np.float16).numpy()
    np.testing.assert_array_equal(got, h * h)
    elementwise("x0 - x1", [gx, gy], out=gx)
    _close(gx.numpy(), x - y, 0, 0)


@pytest.mark.parametrize(
    ("expr", "fn"),
    [
        ("asg_tanh(x0)", np.tanh),
        ("asg_exp(x0)", np.exp),
        (_op_wgsl("sigmoid"), lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))),
        (_op_wgsl("softplus"), lambda v: np.logaddexp(0, v.astype(np.float64))),
        (_op_wgsl("gelu"), None),
    ],
)
def test_transcendentals_survive_large_magnitudes(
    device: Device, expr: str, fn: Callable[[Array], Array] | None
) -> None:
    x = np.array([-200, -60, -20, -1, -1e-3, 0, 1e-3, 1, 20, 60, 80], np.float32)
    got = elementwise(expr, [to_gpu(x, device)]).numpy()
    assert np.all(np.isfinite(got))
    if fn is None:
        from math import erf

        want = np.array([0.5 * v * (1 + erf(v / 2**0.5)) for v in x.astype(float)])
    else:
        with np.errstate(over="ignore"):
            want = fn(x)
    finite = np.isfinite(want)
    _close(got[finite], want[finite].astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), (1, 2), -1])
def test_reductions_match_numpy(device: Device, kind: str, axis: object) -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, (4, 3, 70)).astype(np.float32)
    got = reduce_axis(kind, to_gpu(x, device), axis)  # type: ignore[arg-type]
    want = getattr(np, kind)(x, axis=axis)
    _close(got.numpy(), want, rtol=1e-4)


def test_reduction_keepdims_and_long_rows(device: Device) -> None:
    x = np.random.default_rng(4).standard_normal((3, 5000)).astype(np.float32)
    got = reduce_axis("sum", to_gpu(x, device), 1, keepdims=True)
    assert got.shape == (3, 1)
    _close(got.numpy(), x.sum(1, keepdims=True), rtol=1e-4, atol=1e-3)
    col = reduce_axis("sum", to_gpu(x.T.copy(), device), 0)  # thread-per-output path
    _close(col.numpy(), x.sum(1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_pick_the_first_tie(device: Device, kind: str) -> None:
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, 4, -5]], np.float32)
    got = reduce_axis(kind, to_gpu(x, device), 1).numpy()
    assert got.tolist() == getattr(np, kind)(x, axis=1).tolist()
    assert reduce_axis(kind, to_gpu(x, device), 0).numpy().tolist() == (
        getattr(np, kind)(x, axis=0).tolist()
    )


def _softmax(x: Array, axis: int) -> Array:
    e = np.exp(x - x.max(axis, keepdims=True))
    out: Array = e / e.sum(axis, keepdims=True)
    return out


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax_are_stable(device: Device, axis: int) -> None:
    x = (np.random.default_rng(5).standard_normal((6, 300, 3)) * 60).astype(np.float32)
    g = to_gpu(x, device)
    _close(softmax(g, axis).numpy(), _softmax(x.astype(np.float64), axis), atol=1e-6)
    ref = np.log(_softmax(x.astype(np.float64), axis))
    got = softmax(g, axis, log=True).numpy()
    finite = np.isfinite(ref)
    _close(got[finite], ref[finite], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_numpy(device: Device, affine: bool) -> None:
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((5, 257)) * 10 + 3).astype(np.float32)
    gamma = rng.standard_normal(257).astype(np.float32)
    beta = rng.standard_normal(257).astype(np.float32)
    norm = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    if affine:
        got = layer_norm(to_gpu(x, device), 1, 1e-5, to_gpu(gamma), to_gpu(beta)).numpy()
        _close(got, norm * gamma + beta, rtol=1e-4, atol=1e-4)
    else:
        _close(layer_norm(to_gpu(x, device), 1, 1e-5).numpy(), norm, rtol=1e-4, atol=1e-4)


def test_empty_arrays_need_no_dispatch(device: Device) -> None:
    before = device.counter.dispatches
    out = elementwise("x0 + 1.0", [GpuArray.empty((0, 3), np.float32, device)])
    assert out.shape == (0, 3)
    assert device.counter.dispatches == before


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("shape_axis", [((3000, 5), 0), ((2, 20000), 1), ((1, 9000, 3), 1)])
def test_long_axes_reduce_in_pieces(
    device: Device, kind: str, shape_axis: tuple[tuple[int, ...], int]
) -> None:
    shape, axis = shape_axis
    x = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float32)
    got = reduce_axis(kind, to_gpu(x, device), axis).numpy()
    want = getattr(np, kind)(x.astype(np.float64), axis=axis)
    _close(got, want.astype(np.float32), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    ("rows", "kernel"), [(7, "reduction_cols"), (8, "reduction_cols"), (40, "reduction_cols_block")]
)
def test_a_short_axis_of_many_columns_sums_a_thread_per_output(
    device: Device, rows: int, kernel: str
) -> None:
    """Split-K's partial products, (splits, size): a few rows of many columns are summed
    by a thread per output (four rows at a time, the rest one by one); a longer axis
    keeps the block kernel."""
    from asgrad.gpu.device.buffers import ScopedPool
    from asgrad.gpu.plan.capture import capturing, replay

    x = np.random.default_rng(8).uniform(-1, 1, (rows, 65536 + 5)).astype(np.float32)
    gx = to_gpu(x, device)
    scope = ScopedPool(device.pool)
    with capturing(device, scope) as capture:
        out = reduce_axis("sum", gx, 0)
    assert [str(c[-1]).split(" ")[0] for c in capture.commands] == [kernel]
    replay(device, capture.commands)
    _close(out.numpy(), x.astype(np.float64).sum(0).astype(np.float32), rtol=1e-5, atol=1e-5)
    scope.close()


def _exact_array(device: Device, n: int) -> GpuArray:
    """A float32 array in a buffer of exactly ``4 * n`` bytes (not a pooled size)."""
    from asgrad.gpu.device.buffers import GpuBuffer

    usage = device.wgpu.BufferUsage
    handle = device.handle.create_buffer(
        size=4 * n, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
    )
    return GpuArray(device, GpuBuffer(handle, 4 * n), (n,), np.float32, owned=False)


@pytest.mark.parametrize("n", [1, 3, 4, 255, 1027, 4 * 1024 * 3 + 7])
@pytest.mark.parametrize("exact", [False, True])
def test_copy_moves_every_word(device: Device, n: int, exact: bool) -> None:
    from asgrad.gpu.device.copy import copy_into

    x = np.arange(n, dtype=np.float32) - 0.5
    src = _exact_array(device, n) if exact else to_gpu(x, device)
    if exact:
        device.write(src.buffer, x)
    dst = _exact_array(device, n) if exact else GpuArray.empty((n,), np.float32, device)
    device.write(dst.buffer, np.full(n, -7.0, np.float32))
    copy_into(src, dst)
    np.testing.assert_array_equal(dst.numpy(), x)


@pytest.mark.parametrize(("items", "max_workgroups"), [(1, None), (2, 3), (4, 1), (8, None)])
def test_copy_grid_stride_and_folded_grid(
    device: Device,
    monkeypatch: pytest.MonkeyPatch,
    items: int,
    max_workgroups: int | None,
) -> None:
    from asgrad.gpu.device.copy import copy_bytes

    n = 4 * 256 * 23 + 12  # 23+ blocks at one vec4 per thread
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    src = to_gpu(x, device)
    dst = GpuArray.empty((n,), np.float32, device)
    monkeypatch.setattr(device, "max_groups", 4)  # forces a 2-D fold of the grid
    copy_bytes(src, dst, 4 * n, items=items, max_workgroups=max_workgroups)
    np.testing.assert_array_equal(dst.numpy(), x)
