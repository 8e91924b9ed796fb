"""Scalar expressions (asgrad.tensor.ir.scalar) and the elementwise ops stated in them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.tensor import OpCase, OpDef, TensorType, all_ops
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir import scalar as s

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.3, -0.7, 1.5, -2.5, 3.0, 1e30])

# elementwise ops that pair elements along an axis, so no one element's function
NOT_SCALAR = {"glu", "prelu"}


def _primitive(name: str, arity: int) -> s.Expr:
    return s.Expr(name, tuple(s.arg(i) for i in range(arity)))


def test_every_primitive_has_a_constructor_of_its_name() -> None:
    for name, prim in s.PRIMITIVES.items():
        if name == "cast":
            continue
        build = getattr(s, name)
        node = build(*(s.arg(i) for i in range(prim.arity)))
        assert node == _primitive(name, prim.arity)


@pytest.mark.parametrize("name", sorted(set(s.PRIMITIVES) - {"cast"}))
def test_each_primitive_renders_as_its_numpy_meaning(name: str) -> None:
    prim = s.PRIMITIVES[name]
    args: list[np.ndarray]
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not") or "shift" in name:
        args = [np.array([-7, 0, 3, 12], np.int32), np.array([1, 2, 0, 3], np.int32)]
    elif name in ("floor_divide", "remainder"):
        args = [np.array([-7, 0, 3, 12], np.int32), np.array([2, -3, 5, 7], np.int32)]
    elif name in ("logical_and", "logical_or", "logical_not"):
        args = [np.array([True, False, True, False]), np.array([True, True, False, False])]
    elif name == "where":
        args = [SPECIALS > 0, SPECIALS, -SPECIALS]
    else:
        grid = np.meshgrid(SPECIALS, SPECIALS)
        args = [grid[0].ravel(), grid[1].ravel()]
    args = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in args[: prim.arity]]
    with np.errstate(all="ignore"):
        want = np.asarray(prim.numpy(*args))
        got = s.render_numpy(_primitive(name, prim.arity), args, want.dtype.name)
    np.testing.assert_array_equal(got, want)


def test_a_constant_takes_the_type_of_the_value_it_meets() -> None:
    x = np.array([1.5, -2.0], np.float32)
    got = s.render_numpy(s.arg(0) * 0.1 + 1, [x], "float32")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * np.float32(0.1) + np.float32(1))
    ints = s.render_numpy(s.maximum(s.arg(0), 0), [np.array([-3, 4], np.int32)], "int32")
    np.testing.assert_array_equal(ints, np.array([0, 4], np.int32))


def test_an_expression_that_ignores_an_input_still_broadcasts_to_it() -> None:
    got = s.render_numpy(s.arg(0) * 2.0, [np.ones(3), np.zeros((2, 1))], "float64")
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0))


@pytest.mark.parametrize(
    ("lo", "hi", "dtype"),
    [(-1.0, 1.0, "float32"), (0.5, 0.25, "float64"), (-2, 3, "int32"), (-np.inf, 0.0, "float32")],
)
def test_a_clamp_renders_as_one_clip_with_the_values_of_its_two_ufuncs(
    lo: float, hi: float, dtype: str
) -> None:
    values = SPECIALS if dtype.startswith("float") else np.arange(-5, 6)
    x = values.astype(dtype)
    fn = s.numpy_function(s.clip(s.arg(0), lo, hi), 1, dtype)
    source = fn.source  # type: ignore[attr-defined]  # the rendered text, set by numpy_function
    assert "_clip(" in source
    assert "_maximum" not in source
    got = fn(x)
    assert got.dtype == np.dtype(dtype)
    want = np.minimum(np.maximum(x, lo), hi).astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_substitute_nests_one_expression_in_another() -> None:
    inner = s.exp(s.arg(0))
    outer = s.substitute(s.arg(0) + s.arg(1), [inner, s.arg(0)])
    assert outer == s.add(s.exp(s.arg(0)), s.arg(0))


def test_a_constant_must_be_a_number() -> None:
    with pytest.raises(ArgumentError, match="must be a number"):
        s.const("1")  # type: ignore[arg-type]  # the wrong type on purpose


ELEMENTWISE = [op for op in all_ops() if op.family == "elementwise"]


def test_every_elementwise_op_has_an_expression() -> None:
    missing = [op.name for op in ELEMENTWISE if op.expression is None and op.name not in NOT_SCALAR]
    assert not missing, (
        f"elementwise ops without a scalar expression (give their OpDef expression=...): {missing}"
    )
    assert all(not next(o for o in ELEMENTWISE if o.name == n).primitive for n in NOT_SCALAR)


def _expression_cases() -> list[Any]:
    params = []
    for op in ELEMENTWISE:
        if op.expression is None or op.cases is None:
            continue
        for i, case in enumerate(op.cases(np.random.default_rng(0))):
            params.append(pytest.param(op, case, id=f"{op.name}-{i}"))
    return params


@pytest.mark.parametrize(("op", "case"), _expression_cases())
def test_the_expression_gives_the_kernels_value(op: OpDef, case: OpCase) -> None:
    """Where an op's kernel is numpy's own function or a fast path, its expression must
    still agree with it; where the kernel is the rendered expression, bit for bit."""
    assert op.expression is not None
    arrays = [np.asarray(a) for a in case.inputs]
    attrs = op.normalize_attrs(case.attrs)
    dtype = op.infer([TensorType(a.shape, a.dtype.name) for a in arrays], attrs).dtype
    with np.errstate(all="ignore"):
        want = np.asarray(op.kernel(*arrays, **attrs))
        got = s.render_numpy(s.build(op.expression, len(arrays), attrs, dtype), arrays, dtype)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        rtol, atol = op.tolerance
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


FLOAT_EXPRESSION_OPS = [
    op for op in all_ops() if op.expression is not None and op.cases and op.arity is not None
]


@pytest.mark.parametrize("op", FLOAT_EXPRESSION_OPS, ids=lambda op: op.name)
def test_block_by_block_evaluation_equals_the_whole_array_bit_for_bit(op: OpDef) -> None:
    """Large inputs run through the rendered function in blocks of :data:`scalar.CHUNK`;
    each element must get the value the whole-array evaluation gives it."""
    assert op.cases is not None
    assert op.expression is not None
    case = next(c for c in op.cases(np.random.default_rng(0)) if all(np.size(x) for x in c.inputs))
    n = 3 * s.CHUNK + 5
    rng = np.random.default_rng(1)
    arrays = []
    for x in case.inputs:
        picked = np.asarray(x).reshape(-1)[rng.integers(0, np.size(x), n)]
        arrays.append(picked.astype(np.float32) if picked.dtype == np.float64 else picked)
    attrs = op.normalize_attrs(case.attrs)
    dtype = op.infer([TensorType(a.shape, a.dtype.name) for a in arrays], attrs).dtype
    fn = s.numpy_function(s.build(op.expression, len(arrays), attrs, dtype), len(arrays), dtype)
    blocked = fn(*arrays)
    small = np.concatenate([fn(*(a[i : i + 7] for a in arrays)) for i in range(0, n, 7)])
    np.testing.assert_array_equal(blocked, small)
