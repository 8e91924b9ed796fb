"""Each scalar-expression primitive rendered as WGSL gives numpy's value on the GPU,
NaN and infinities included (asgrad.gpu.lowering.scalar.render_wgsl, prelude.wgsl)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, GpuUnsupportedError, to_gpu
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.scalar import render_wgsl
from asgrad.tensor.ir import scalar as s

SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.3, -0.7, 1.5, -2.5, 3.0, 50.0, -50.0], np.float32
)
FLOAT_UNARY = [
    "neg", "abs", "sign", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tanh", "erf", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite",
]  # fmt: skip
FLOAT_BINARY = [
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne",
]  # fmt: skip
INT_PRIMITIVES = [
    "add", "sub", "mul", "neg", "abs", "sign", "maximum", "minimum", "lt", "ge", "eq", "ne",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
    "isnan", "isfinite",
]  # fmt: skip
BOOL_PRIMITIVES = [
    "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "maximum", "minimum", "eq", "ne",
]  # fmt: skip

_STORAGE = {"float32": "f32", "int32": "i32", "bool": "u32"}


def _run(device: Device, e: s.Expr, args: list[np.ndarray], dtype: str) -> np.ndarray:
    types = [_STORAGE[a.dtype.name] for a in args]
    names = [f"x{k}" for k in range(len(args))]
    wgsl = render_wgsl(e, names, types, _STORAGE[dtype])
    out = elementwise(wgsl, [to_gpu(a, device) for a in args], np.dtype(dtype))
    return out.numpy()


def _check(device: Device, e: s.Expr, args: list[np.ndarray]) -> None:
    with np.errstate(all="ignore"):
        want = np.asarray(s.PRIMITIVES[e.op].numpy(*args))
    if want.dtype == np.float64:
        want = want.astype(np.float32)
    got = _run(device, e, args, want.dtype.name)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)
        inf = np.isinf(want)  # the sign of an infinity matters, a NaN's does not
        assert np.array_equal(np.signbit(got[inf]), np.signbit(want[inf]))
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


def _node(name: str, arity: int) -> s.Expr:
    return s.Expr(name, tuple(s.arg(i) for i in range(arity)))


@pytest.mark.gpu
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_unary_primitive_matches_numpy(device: Device, name: str) -> None:
    _check(device, _node(name, 1), [SPECIALS])


@pytest.mark.gpu
@pytest.mark.parametrize("name", FLOAT_BINARY)
def test_float_binary_primitive_matches_numpy(device: Device, name: str) -> None:
    a, b = (g.ravel().astype(np.float32) for g in np.meshgrid(SPECIALS, SPECIALS))
    _check(device, _node(name, 2), [a, b])


@pytest.mark.gpu
@pytest.mark.parametrize("name", INT_PRIMITIVES)
def test_int32_primitive_matches_numpy(device: Device, name: str) -> None:
    a = np.array([-7, 0, 3, 12, -2147483648, 2147483647, 5, -1], np.int32)
    b = np.array([1, 2, 0, 3, 31, 40, -1, 5], np.int32)
    arity = s.PRIMITIVES[name].arity
    _check(device, _node(name, arity), [a, b][:arity])


@pytest.mark.gpu
@pytest.mark.parametrize("name", BOOL_PRIMITIVES)
def test_bool_primitive_matches_numpy(device: Device, name: str) -> None:
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    arity = s.PRIMITIVES[name].arity
    _check(device, _node(name, arity), [a, b][:arity])


@pytest.mark.gpu
def test_where_selects_numpy_s_branch(device: Device) -> None:
    cond = SPECIALS > 0
    _check(device, _node("where", 3), [cond, SPECIALS, -SPECIALS])


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("source", "target"),
    [("float32", "int32"), ("float32", "bool"), ("bool", "float32"), ("int32", "float32")],
)
def test_cast_converts_as_numpy(device: Device, source: str, target: str) -> None:
    values = SPECIALS[3:] if "int32" in (source, target) else SPECIALS  # NaN/inf: no int
    x = (values > 0) if source == "bool" else values.astype(source)
    with np.errstate(all="ignore"):
        want = x.astype(target)
    got = _run(device, s.cast(s.arg(0), target), [x], target)
    np.testing.assert_array_equal(got, want)


def test_wgsl_spells_float_primitives_through_the_nan_aware_helpers() -> None:
    e = s.where(s.lt(s.arg(0), 0.0), s.maximum(s.arg(0), s.arg(1)), s.floor(s.arg(1)))
    wgsl = render_wgsl(e, ["a", "b"], ["f32", "f32"], "f32")
    assert wgsl == "select(asg_floor(b), asg_max(a, b), asg_lt(a, 0.0))"
    assert render_wgsl(s.arg(0) + s.arg(1), ["x0", "x1"], ["f32", "f32"], "f32") == "x0 + x1"


def test_wgsl_types_constants_and_bools_by_what_they_meet() -> None:
    ints = render_wgsl(s.maximum(s.arg(0), 0), ["x0"], ["i32"], "i32")
    assert ints == "max(x0, 0i)"
    # a bool is stored as u32 0/1 and read as a WGSL bool
    cmp = render_wgsl(s.logical_not(s.arg(0)), ["x0"], ["u32"], "u32")
    assert cmp == "select(0u, 1u, (!(x0 != 0u)))"


def test_a_primitive_without_a_wgsl_form_names_what_lowers_it() -> None:
    with pytest.raises(GpuUnsupportedError, match="integer division"):
        render_wgsl(s.floor_divide(s.arg(0), s.arg(1)), ["a", "b"], ["i32", "i32"], "i32")
