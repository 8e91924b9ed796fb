"""The elementwise math ops of issue 13, registered into the elementwise family.

Their shape/dtype rules and kernels live in `asgrad.tensor.ops.elementwise` (the
family's file); this module declares them (which keeps that file within the size
limit) and holds the expansions of the ops that are compositions of others:
``frac`` (``x - trunc(x)``), ``isclose``, ``nan_to_num`` and the logical ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.ops import _math_cases as cases
from asgrad.tensor.ops.elementwise import (
    _binary,
    _elementwise,
    _frac,
    _infer_bitwise,
    _infer_int_binary,
    _infer_isclose,
    _infer_logical,
    _infer_predicate,
    _int_division,
)

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _apply(op: str, *inputs: Tensor, **attrs: Any) -> Tensor:
    return inputs[0].graph.apply(op, inputs, attrs)


def _const(like: Tensor, value: float) -> Tensor:
    return like.graph.constant(value, like.dtype)


def _expand_frac(x: Tensor) -> Tensor:
    return _apply("sub", x, _apply("trunc", x))


def _isclose(
    a: Tensor, b: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Tensor:
    # PyTorch's and numpy's rule: a == b (equal infinities), or both finite and |a - b|
    # within atol + rtol * |b|; NaN is close to NaN only with equal_nan. Non-finite
    # pairs are compared as 0 there, so that no inf - inf is formed.
    finite = _apply("bitwise_and", _apply("isfinite", a), _apply("isfinite", b))
    zero = _const(a, 0.0)
    fa, fb = _apply("where", finite, a, zero), _apply("where", finite, b, zero)
    diff = _apply("abs", _apply("sub", fa, fb))
    bound = _apply("add", _apply("mul", _apply("abs", fb), _const(b, rtol)), _const(b, atol))
    within = _apply("bitwise_and", finite, _apply("less_equal", diff, bound))
    out = _apply("bitwise_or", _apply("equal", a, b), within)
    if equal_nan:
        both = _apply("bitwise_and", _apply("isnan", a), _apply("isnan", b))
        out = _apply("bitwise_or", out, both)
    return out


def _nan_to_num(
    x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    big = float(np.finfo(x.dtype).max)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = _apply("where", _apply("equal", x, _const(x, -np.inf)), _const(x, lo), x)
    out = _apply("where", _apply("equal", x, _const(x, np.inf)), _const(x, hi), out)
    return _apply("where", _apply("isnan", x), _const(x, nan), out)


def _truth(x: Tensor) -> Tensor:
    return x if x.dtype == "bool" else _apply("not_equal", x, _const(x, 0))


def _logical(op: str) -> Any:
    def expand(a: Tensor, b: Tensor) -> Tensor:
        return _apply(op, _truth(a), _truth(b))

    return expand


def _logical_not(x: Tensor) -> Tensor:
    return _apply("bitwise_not", x) if x.dtype == "bool" else _apply("equal", x, _const(x, 0))


_ROUND_ATTRS: tuple[dict[str, object], ...] = ({}, {"decimals": 2}, {"decimals": -1})
_elementwise(
    "floor",
    np.floor,
    "largest integer <= x (zero gradient)",
    cases.rounding_cases(),
    differentiable=False,
)
_elementwise(
    "ceil",
    np.ceil,
    "smallest integer >= x (zero gradient)",
    cases.rounding_cases(),
    differentiable=False,
)
_elementwise(
    "trunc",
    np.trunc,
    "x rounded towards 0 (zero gradient)",
    cases.rounding_cases(),
    differentiable=False,
)
_elementwise(
    "round",
    np.round,
    "x rounded to decimals, halves to even (zero gradient)",
    cases.rounding_cases(_ROUND_ATTRS),
    differentiable=False,
    tolerance=(1e-6, 1e-6),
)
_elementwise("frac", _frac, "x - trunc(x)", cases.frac_cases, expand=_expand_frac)
for _name, _test_fn, _doc in (
    ("isnan", np.isnan, "whether x is NaN"),
    ("isinf", np.isinf, "whether x is +inf or -inf"),
    ("isfinite", np.isfinite, "whether x is neither NaN nor infinite"),
):
    _elementwise(
        _name, _test_fn, _doc, cases.predicate_cases, infer=_infer_predicate, differentiable=False
    )
_binary(
    "isclose",
    np.isclose,
    "|a - b| <= atol + rtol |b|, or a == b (numpy's and PyTorch's rule)",
    cases.isclose_cases,
    infer=_infer_isclose,
    differentiable=False,
    expand=_isclose,
)
_elementwise(
    "nan_to_num",
    np.nan_to_num,
    "NaN and +-inf replaced by numbers (float max by default)",
    cases.nan_to_num_cases,
    expand=_nan_to_num,
)
for _name, _logic_fn, _op in (
    ("logical_and", np.logical_and, "bitwise_and"),
    ("logical_or", np.logical_or, "bitwise_or"),
    ("logical_xor", np.logical_xor, "bitwise_xor"),
):
    _binary(
        _name,
        _logic_fn,
        f"{_name} of the truth values (nonzero is true)",
        cases.logical_cases(),
        infer=_infer_logical,
        differentiable=False,
        expand=_logical(_op),
    )
_elementwise(
    "logical_not",
    np.logical_not,
    "not x (zero is true)",
    cases.logical_cases(unary=True),
    infer=_infer_logical,
    differentiable=False,
    expand=_logical_not,
)
for _name, _bit_fn, _doc in (
    ("bitwise_and", np.bitwise_and, "a & b (integers or bools)"),
    ("bitwise_or", np.bitwise_or, "a | b (integers or bools)"),
    ("bitwise_xor", np.bitwise_xor, "a ^ b (integers or bools)"),
):
    _binary(
        _name,
        _bit_fn,
        _doc,
        cases.int_binary_cases(bools=True),
        infer=_infer_bitwise,
        differentiable=False,
    )
_elementwise(
    "bitwise_not",
    np.invert,
    "~x (integers or bools)",
    cases.invert_cases,
    infer=_infer_bitwise,
    differentiable=False,
)
_binary(
    "left_shift",
    np.left_shift,
    "a << b (integers; 0 for b outside [0, bits))",
    cases.shift_cases,
    infer=_infer_int_binary,
    differentiable=False,
)
_binary(
    "right_shift",
    np.right_shift,
    "a >> b (integers; the sign for b outside [0, bits))",
    cases.shift_cases,
    infer=_infer_int_binary,
    differentiable=False,
)
_binary(
    "floor_divide",
    _int_division(np.floor_divide, "floor_divide"),
    "a // b, rounded down (integers; b == 0 is an error)",
    cases.int_binary_cases(nonzero=True),
    infer=_infer_int_binary,
    differentiable=False,
)
_binary(
    "remainder",
    _int_division(np.remainder, "remainder"),
    "a % b, the sign of b (integers; b == 0 is an error)",
    cases.int_binary_cases(nonzero=True),
    infer=_infer_int_binary,
    differentiable=False,
)
