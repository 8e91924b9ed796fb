"""NaN and infinities on the GPU as on the CPU, for every op of the registry.

WGSL leaves min/max/clamp/sign and comparisons with NaN undefined (lavapipe's
``max(NaN, 0.0)`` is 0), so the GPU kernels check the bits. These tests feed NaN,
+-inf and huge values into every float input of every op's registry cases (and the
cross product of special values into every elementwise op) and require the NaN
positions and the infinities (with their signs) of the GPU's result to be the CPU
backend's; the elementwise pairs and the reductions in float16 too. Integers and index
checks are in the sibling ``test_numerics_*`` files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, GpuUnsupportedError
from asgrad.gpu.errors import GpuIntegerOverflowError
from asgrad.tensor import Graph, OpCase, OpDef, all_ops, evaluate

pytestmark = pytest.mark.gpu

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, 1e30, -1e30, -0.0], np.float32)
# the cross product of these is fed to every elementwise op
_NUMBERS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -17.0, 100.0]
VALUES = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 88.8, -88.8, 1e-30, *_NUMBERS], np.float32)
I32 = np.iinfo(np.int32)

# Where the backends knowingly differ (docs/gpu.md says why): (op, input) -> how.
# "more": the GPU's NaNs are the CPU's and more: the conv adjoints' implicit GEMM
# multiplies a non-finite weight by the zero of a tap that does not exist.
# "windows": the CPU's adaptive pooling is a product with pooling matrices, which
# spreads a NaN to every output (0 * NaN); the GPU's NaNs are exactly the windows'.
DIVERGENT = {
    ("conv2d_backward_input", 1): "more",
    ("conv_transpose2d", 1): "more",
    ("adaptive_avg_pool2d", 0): "windows",
    ("adaptive_avg_pool2d_backward", 0): "windows",
    ("conv_transpose1d", 1): "more",  # conv_transpose2d's, which it expands into
    ("conv_transpose3d", 1): "more",  # conv_transpose2d's, per depth tap
    ("adaptive_avg_pool1d", 0): "windows",  # adaptive_avg_pool2d's
    ("adaptive_avg_pool3d", 0): "windows",  # adaptive_avg_pool2d's, per depth window
}


def _float32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "f" else x


def _attrs32(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("float32" if v == "float64" else v) for k, v in attrs.items()}


def _variants(x: np.ndarray) -> dict[str, np.ndarray]:
    """x with NaNs, with infinities, and with every special value in a pattern."""
    n = x.size
    nan, inf, mixed = (x.copy().reshape(-1) for _ in range(3))
    nan[[0, n // 2]] = np.nan
    inf[0], inf[-1] = np.inf, -np.inf
    if n == 1:
        inf[0] = -np.inf  # one element: the second assignment wins
    for k, value in enumerate(SPECIAL):
        mixed[k::9] = value
    return {v: a.reshape(x.shape) for v, a in (("nan", nan), ("inf", inf), ("mixed", mixed))}


def _run(op: str, inputs: list[np.ndarray], attrs: Mapping[str, Any], backend: str) -> np.ndarray:
    g = Graph(f"numerics-{op}")
    xs = [g.input(f"x{i}", x.shape, x.dtype.name, free=()) for i, x in enumerate(inputs)]
    out = g.apply(op, xs, attrs)
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    with np.errstate(all="ignore"):  # numpy warns about the values these tests feed
        return evaluate([out], feeds, backend=backend)[0]


def _specials(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The NaN mask and the infinities (0 elsewhere) of a float result."""
    return np.isnan(x), np.where(np.isinf(x), x, 0.0)


def _assert_same_specials(gpu: np.ndarray, cpu: np.ndarray, what: str) -> None:
    if cpu.dtype.kind != "f":
        np.testing.assert_array_equal(gpu, cpu.astype(gpu.dtype), err_msg=what)
        return
    (gpu_nan, gpu_inf), (cpu_nan, cpu_inf) = _specials(gpu), _specials(cpu)
    np.testing.assert_array_equal(gpu_nan, cpu_nan, err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(gpu_inf, cpu_inf, err_msg=f"{what}: infinities")


def _check(op: OpDef, inputs: list[np.ndarray], attrs: dict[str, Any], what: str) -> None:
    """The GPU against the CPU on ``inputs``: the same specials, or the documented error."""
    cpu = _run(op.name, inputs, attrs, "cpu")
    if any(x.dtype.kind in "iu" and x.size and not I32.min <= x.min() <= x.max() <= I32.max
           for x in inputs):  # fmt: skip
        with pytest.raises(GpuUnsupportedError, match="outside the int32 range"):
            _run(op.name, inputs, attrs, "gpu")  # an int64 feed beyond int32 (a seed)
        return
    if cpu.dtype.kind in "iu" and cpu.size and not I32.min <= cpu.min() <= cpu.max() <= I32.max:
        with pytest.raises(GpuIntegerOverflowError, match=op.name):
            _run(op.name, inputs, attrs, "gpu")  # the CPU's int64 result does not fit
        return
    _assert_same_specials(_run(op.name, inputs, attrs, "gpu"), cpu, what)


def _cases() -> list[Any]:
    params = []
    for op in all_ops():
        if op.cases is None:
            continue
        for i, case in enumerate(op.cases(np.random.default_rng(0))):
            params.append(pytest.param(op, case, id=f"{op.name}-{i}-{case.label}".strip("-")))
    return params


@pytest.mark.parametrize(("op", "case"), _cases())
def test_specials_in_every_float_input_match_the_cpu(
    device: Device, op: OpDef, case: OpCase
) -> None:
    inputs = [_float32(np.asarray(x)) for x in case.inputs]
    attrs = _attrs32(case.attrs)
    for k, x in enumerate(inputs):
        if x.dtype != np.float32 or not x.size:
            continue
        for name, value in _variants(x).items():
            fed = [*inputs[:k], value, *inputs[k + 1 :]]
            what = f"{op.name} with {name} in input {k}"
            how = DIVERGENT.get((op.name, k))
            if how is None:
                _check(op, fed, attrs, what)
            else:
                _check_divergent(op, fed, attrs, how, what)


def _check_divergent(
    op: OpDef, inputs: list[np.ndarray], attrs: dict[str, Any], how: str, what: str
) -> None:
    gpu = np.isnan(_run(op.name, inputs, attrs, "gpu"))
    cpu = np.isnan(_run(op.name, inputs, attrs, "cpu"))
    if how == "more":
        assert (gpu | ~cpu).all(), f"{what}: a NaN of the CPU is a number on the GPU"
    else:
        assert how == "windows"
        assert (cpu | ~gpu).all(), f"{what}: a NaN of the GPU is a number on the CPU"
        if op.name == "adaptive_avg_pool3d":  # its numpy kernel averages each window
            with np.errstate(invalid="ignore"):
                want = np.isnan(op.kernel(inputs[0].astype(np.float64), **attrs))
            np.testing.assert_array_equal(gpu, want, what)
            return
        if op.name == "adaptive_avg_pool1d":  # adaptive_avg_pool2d over a unit height
            lifted = [inputs[0][:, :, None, :]]
            want = _nan_windows("adaptive_avg_pool2d", lifted, (*gpu.shape[:2], 1, gpu.shape[2]))
            np.testing.assert_array_equal(gpu, want[:, :, 0], what)
            return
        np.testing.assert_array_equal(gpu, _nan_windows(op.name, inputs, gpu.shape), what)


def _nan_windows(op: str, inputs: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Where adaptive pooling over PyTorch's windows (or its adjoint) gives NaN: each
    output sums only the values of its own windows."""

    def windows(size: int, out: int) -> list[slice]:
        return [slice(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]

    forward = op == "adaptive_avg_pool2d"
    big, small = (inputs[0].shape, shape) if forward else (inputs[1].shape, inputs[0].shape)
    values = inputs[0].astype(np.float64)
    result = np.zeros(shape)
    with np.errstate(invalid="ignore"):
        for oy, ry in enumerate(windows(big[2], small[2])):
            for ox, rx in enumerate(windows(big[3], small[3])):
                if forward:  # output (oy, ox) sums its window
                    result[:, :, oy, ox] = values[:, :, ry, rx].sum(axis=(2, 3))
                else:  # every pixel of window (oy, ox) receives a share of g[oy, ox]
                    result[:, :, ry, rx] += values[:, :, oy, ox][:, :, None, None]
    return np.isnan(result)


def _elementwise_attrs() -> list[Any]:
    """Every elementwise op with each distinct attrs of its registry cases (and casts
    of floats to every dtype)."""
    params = []
    for op in all_ops():
        if op.family != "elementwise" or op.cases is None:
            continue
        cases = op.cases(np.random.default_rng(0))
        if not any(np.asarray(x).dtype.kind == "f" for c in cases for x in c.inputs):
            continue  # integers and bools only: test_numerics_ints.py and its kin
        seen = [_attrs32(case.attrs) for case in cases]
        if op.name == "cast":
            seen = [{"dtype": dtype} for dtype in ("float32", "int32", "int64", "bool")]
        for k, attrs in enumerate(seen):
            if attrs not in seen[:k]:
                params.append(pytest.param(op, attrs, id=f"{op.name}-{attrs}"))
    return params


@pytest.mark.parametrize(("op", "attrs"), _elementwise_attrs())
def test_every_pair_of_special_values_matches_the_cpu(
    device: Device, op: OpDef, attrs: dict[str, Any]
) -> None:
    _check_pairs(op, attrs, VALUES)


@pytest.mark.parametrize(("op", "attrs"), _elementwise_attrs())
def test_every_pair_of_special_values_matches_the_cpu_in_float16(
    device: Device, op: OpDef, attrs: dict[str, Any]
) -> None:
    with np.errstate(over="ignore"):  # 1e30 is inf in float16, 1e-30 zero
        values = VALUES.astype(np.float16)
    _check_pairs(op, {k: "float16" if v == "float32" else v for k, v in attrs.items()}, values)


def _check_pairs(op: OpDef, attrs: dict[str, Any], values: np.ndarray) -> None:
    """``op`` on every pair of ``values`` (or each one), the GPU against the CPU."""
    a, b = (v.copy() for v in np.meshgrid(values, values, indexing="ij"))
    if op.name == "where":
        inputs = [np.arange(a.size).reshape(a.shape) % 3 == 0, a, b]
    elif op.name == "glu":  # a * sigmoid(b), the halves along the last axis
        # without b = -88.8, whose sigmoid is a float32 subnormal, which a GPU may flush
        # to zero (docs/gpu.md): inf * 3e-39 is inf on the CPU, NaN there
        keep = values.dtype.type(-88.8) != values
        inputs = [np.concatenate([a[:, keep], b[:, keep]], axis=-1)]
        attrs = {"axis": -1}
    elif op.name == "prelu":  # x[0, c, j] = values[j] with the weight values[c]
        inputs = [b[None], values.copy()]
    elif op.arity == 2:
        inputs = [a, b]
    else:
        inputs = [values.copy()]
    if op.name == "cast" and attrs["dtype"] == "int32":
        # NaN, +-inf and values beyond int32 become -2**31 (numpy's result on x86-64,
        # where CI runs; numpy on other machines may differ)
        x = inputs[0].astype(np.float64)
        fits = np.abs(np.nan_to_num(x, nan=np.inf)) < 2.0**31
        want = np.where(fits, np.trunc(np.where(fits, x, 0)), I32.min).astype(np.int32)
        np.testing.assert_array_equal(_run("cast", inputs, attrs, "gpu"), want)
        return
    _check(op, inputs, attrs, f"{op.name}{attrs}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", ["max", "min", "sum", "mean"])
@pytest.mark.parametrize(
    ("shape", "axis"),
    [((3, 70), 1), ((2, 20000), 1), ((20000, 3), 0), ((600, 40), 0), ((4, 5, 6), (0, 2))],
    ids=["rows", "long rows (split)", "long columns (split)", "columns", "two axes"],
)
def test_reductions_let_nan_win_and_keep_infinities(
    device: Device, kind: str, shape: tuple[int, ...], axis: int | tuple[int, ...], dtype: str
) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, 3, replace=False)] = np.nan
    flat[rng.choice(flat.size, 3, replace=False)] = np.inf
    flat[rng.choice(flat.size, 3, replace=False)] = -np.inf
    g = Graph("reduce")
    t = g.input("x", shape, dtype)
    got = evaluate([getattr(t, kind)(axis=axis)], {"x": x}, backend="gpu")[0]
    with np.errstate(invalid="ignore"):
        want = getattr(np, kind)(x, axis=axis)
    _assert_same_specials(got, want, f"{kind} over {axis}")
    # a row of -inf only: max is -inf (not the most negative float)
    low = np.full(shape, -np.inf, dtype)
    got = evaluate([getattr(t, kind)(axis=axis)], {"x": low}, backend="gpu")[0]
    _assert_same_specials(got, getattr(np, kind)(low, axis=axis), f"{kind} of -inf")


@pytest.mark.parametrize("length", [5, 300, 5000])
def test_argmax_returns_the_first_nan_like_numpy(device: Device, length: int) -> None:
    x = np.arange(3 * length, dtype=np.float32).reshape(3, length)
    x[0, [length // 2, length - 1]] = np.nan  # the first NaN wins over larger numbers
    x[1, 0] = np.nan
    x[2, :] = np.inf  # ties: the first index
    g = Graph("argmax")
    t = g.input("x", x.shape)
    got = evaluate([t.argmax(axis=1)], {"x": x}, backend="gpu")[0]
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))
    got = evaluate([t.argmax(axis=0)], {"x": x}, backend="gpu")[0]
    np.testing.assert_array_equal(got, np.argmax(x, axis=0))


def test_nan_passes_through_relu_maximum_exp_sign_elu_tanh_and_clamp(device: Device) -> None:
    g = Graph("nan")
    x = g.input("x", (3,))
    y = g.input("y", (3,))
    outs = [x.relu(), x.maximum(y), x.exp(), x.sign(), x.elu(), x.tanh(), x.clamp(-1.0, 1.0)]
    feeds = {"x": np.array([np.nan, 1.0, -1.0], np.float32), "y": np.zeros(3, np.float32)}
    for got in evaluate(outs, feeds, backend="gpu"):
        assert np.isnan(got[0]), got
        assert not np.isnan(got[1:]).any(), got


@pytest.mark.parametrize("x", [-20.0, -17.0, -88.0, 30.0, -30.0, -50.0, 0.0, 5.0])
def test_sigmoid_is_accurate_at_large_negative_inputs(device: Device, x: float) -> None:
    # 1 / (1 + e**-x) for x >= 0, e**x / (1 + e**x) below, as the CPU's kernel
    want = 1.0 / (1.0 + math.exp(-x))
    g = Graph("sigmoid")
    t = g.input("x", (1,))
    feeds = {"x": np.array([x], np.float32)}
    outs = [t.sigmoid(), t.silu(), t.sigmoid().log()]
    sig, silu, log_sig = evaluate(outs, feeds, backend="gpu")
    tiny = float(np.finfo(np.float32).tiny)  # float32 subnormals may flush to zero on a GPU
    np.testing.assert_allclose(sig[0], want, rtol=1e-5, atol=tiny)
    np.testing.assert_allclose(silu[0], x * want, rtol=1e-5, atol=tiny * 100)
    if want > tiny:  # log(sigmoid(-20)) is -20, not -inf
        np.testing.assert_allclose(log_sig[0], math.log(np.float32(want)), rtol=1e-5, atol=1e-7)
