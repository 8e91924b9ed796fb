"""The elementwise math ops: rounding, tests of special values, logic, bits, integer
division.

Each op's expression (`asgrad.tensor.ir.scalar`) is its meaning, as in
`asgrad.tensor.ops.elementwise`, whose shape/dtype rules these share. ``frac``,
``isclose``, ``nan_to_num`` and the logical ops expand into other ops when applied;
their expansions are here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.ir import scalar as s
from asgrad.tensor.ir.registry import Attr
from asgrad.tensor.ir.scalar import Expr
from asgrad.tensor.ops import _math_cases as cases
from asgrad.tensor.ops.elementwise_kernels import _binary, _elementwise, _int_division
from asgrad.tensor.ops.elementwise_types import (
    _infer_bitwise,
    _infer_int_binary,
    _infer_isclose,
    _infer_logical,
    _infer_predicate,
)

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _apply(op: str, *inputs: Tensor, **attrs: Any) -> Tensor:
    return inputs[0].graph.apply(op, inputs, attrs)


def _const(like: Tensor, value: float) -> Tensor:
    return like.graph.constant(value, like.dtype)


def _expand_frac(x: Tensor) -> Tensor:
    return _apply("sub", x, _apply("trunc", x))


def _isclose(a: Tensor, b: Tensor, rtol: float, atol: float, equal_nan: bool) -> Tensor:
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


def _nan_to_num(x: Tensor, nan: float, posinf: float | None, neginf: float | None) -> Tensor:
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


def _round_expr(x: Expr, decimals: int) -> Expr:
    """numpy's: ``rint(x * 10**d) / 10**d``, or ``rint(x / 10**-d) * 10**-d``."""
    if not decimals:
        return s.rint(x)
    scale = 10.0 ** abs(decimals)
    return s.rint(x * scale) / scale if decimals > 0 else s.rint(x / scale) * scale


def _isclose_expr(a: Expr, b: Expr, rtol: float, atol: float, equal_nan: bool) -> Expr:
    finite = s.logical_and(s.isfinite(a), s.isfinite(b))
    fa, fb = s.where(finite, a, 0), s.where(finite, b, 0)
    within = s.logical_and(finite, s.le(abs(fa - fb), abs(fb) * rtol + atol))
    out = s.logical_or(s.eq(a, b), within)
    if equal_nan:
        out = s.logical_or(out, s.logical_and(s.isnan(a), s.isnan(b)))
    return out


def _nan_to_num_expr(
    x: Expr, nan: float, posinf: float | None, neginf: float | None, dtype: str
) -> Expr:
    """``dtype`` (the result's) gives the default replacements: its largest numbers."""
    big = float(np.finfo(dtype).max)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = s.where(s.eq(x, -np.inf), lo, x)
    out = s.where(s.eq(x, np.inf), hi, out)
    return s.where(s.isnan(x), nan, out)


def _truth_expr(x: Expr) -> Expr:
    return s.cast(x, "bool")


def _rounding(name: str, expression: Any, doc: str) -> None:
    _elementwise(
        name, None, doc, cases.rounding_cases(), differentiable=False, expression=expression
    )


_rounding("floor", s.floor, "largest integer <= x (zero gradient)")
_rounding("ceil", s.ceil, "smallest integer >= x (zero gradient)")
_rounding("trunc", s.trunc, "x rounded towards 0 (zero gradient)")
_elementwise(
    "round",
    np.round,  # numpy's own, the reference of the expression
    "x rounded to decimals, halves to even (zero gradient)",
    cases.rounding_cases(({}, {"decimals": 2}, {"decimals": -1})),
    differentiable=False,
    tolerance=(1e-6, 1e-6),
    attrs=(Attr(name="decimals", kind=int, default=0, doc="decimal places (< 0: tens...)"),),
    expression=_round_expr,
)
_elementwise(
    "frac",
    None,
    "x - trunc(x)",
    cases.frac_cases,
    expand=_expand_frac,
    expression=lambda x: x - s.trunc(x),
)
for _name, _test, _doc in (
    ("isnan", s.isnan, "whether x is NaN"),
    ("isinf", s.isinf, "whether x is +inf or -inf"),
    ("isfinite", s.isfinite, "whether x is neither NaN nor infinite"),
):
    _elementwise(
        _name,
        None,
        _doc,
        cases.predicate_cases,
        infer=_infer_predicate,
        differentiable=False,
        expression=_test,
    )
_binary(
    "isclose",
    np.isclose,  # numpy's own, the reference of the expression
    "|a - b| <= atol + rtol |b|, or a == b (numpy's and PyTorch's rule)",
    cases.isclose_cases,
    infer=_infer_isclose,
    differentiable=False,
    expand=_isclose,
    attrs=(
        Attr(name="rtol", kind=float, default=1e-5, doc="relative tolerance"),
        Attr(name="atol", kind=float, default=1e-8, doc="absolute tolerance"),
        Attr(name="equal_nan", kind=bool, default=False, doc="whether NaN is close to NaN"),
    ),
    expression=_isclose_expr,
)
_elementwise(
    "nan_to_num",
    np.nan_to_num,  # numpy's own, the reference of the expression
    "NaN and +-inf replaced by numbers (float max by default)",
    cases.nan_to_num_cases,
    expand=_nan_to_num,
    attrs=(
        Attr(name="nan", kind=float, default=0.0, doc="what NaN becomes"),
        Attr(name="posinf", kind=float, default=None, optional=True, doc="what +inf becomes"),
        Attr(name="neginf", kind=float, default=None, optional=True, doc="what -inf becomes"),
    ),
    expression=_nan_to_num_expr,
)
for _name, _logic, _op in (
    ("logical_and", s.logical_and, "bitwise_and"),
    ("logical_or", s.logical_or, "bitwise_or"),
    ("logical_xor", s.ne, "bitwise_xor"),
):
    _binary(
        _name,
        None,
        f"{_name} of the truth values (nonzero is true)",
        cases.logical_cases(),
        infer=_infer_logical,
        differentiable=False,
        expand=_logical(_op),
        expression=lambda a, b, _logic=_logic: _logic(_truth_expr(a), _truth_expr(b)),
    )
_elementwise(
    "logical_not",
    None,
    "not x (zero is true)",
    cases.logical_cases(unary=True),
    infer=_infer_logical,
    differentiable=False,
    expand=_logical_not,
    expression=lambda x: s.logical_not(_truth_expr(x)),
)
for _name, _bits, _doc in (
    ("bitwise_and", s.bitwise_and, "a & b (integers or bools)"),
    ("bitwise_or", s.bitwise_or, "a | b (integers or bools)"),
    ("bitwise_xor", s.bitwise_xor, "a ^ b (integers or bools)"),
):
    _binary(
        _name,
        None,
        _doc,
        cases.int_binary_cases(bools=True),
        infer=_infer_bitwise,
        differentiable=False,
        expression=_bits,
    )
_elementwise(
    "bitwise_not",
    None,
    "~x (integers or bools)",
    cases.invert_cases,
    infer=_infer_bitwise,
    differentiable=False,
    expression=s.bitwise_not,
)
_binary(
    "left_shift",
    None,
    "a << b (integers; 0 for b outside [0, bits))",
    cases.shift_cases,
    infer=_infer_int_binary,
    differentiable=False,
    expression=s.left_shift,
)
_binary(
    "right_shift",
    None,
    "a >> b (integers; the sign for b outside [0, bits))",
    cases.shift_cases,
    infer=_infer_int_binary,
    differentiable=False,
    expression=s.right_shift,
)
_binary(
    "floor_divide",
    _int_division(np.floor_divide, "floor_divide"),
    "a // b, rounded down (integers; b == 0 is an error)",
    cases.int_binary_cases(nonzero=True),
    infer=_infer_int_binary,
    differentiable=False,
    expression=s.floor_divide,
)
_binary(
    "remainder",
    _int_division(np.remainder, "remainder"),
    "a % b, the sign of b (integers; b == 0 is an error)",
    cases.int_binary_cases(nonzero=True),
    infer=_infer_int_binary,
    differentiable=False,
    expression=s.remainder,
)
