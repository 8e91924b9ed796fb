"""Elementwise ops: unary math and activations, binary arithmetic, comparisons, where.

Each op states what it computes per element once, as a scalar expression
(:mod:`asgrad.tensor.ir.scalar`, the ``expression`` of its :class:`OpDef`); its numpy
kernel is that expression rendered by numpy (or the primitive's own ufunc), and the
other backends render theirs from it. Test oracles written independently are in the
tests (``test_op_values.py``).

``gelu_backward(g, x)`` is GELU's input gradient ``g * GELU'(x)`` as one composite
op (its own gradient rule gives higher-order gradients). ``erf``, ``gelu`` and
``gelu_backward`` have float32 paths (:mod:`asgrad.tensor.ops._erf`) that the CPU
code generator takes through :class:`~asgrad.tensor.registry.IntoKernel`. The test
cases are in :mod:`asgrad.tensor.ops._elementwise_cases`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.dtypes import as_dtype, is_int
from asgrad.tensor.errors import DTypeError, IntegerArithmeticError, ShapeError
from asgrad.tensor.ir import scalar as s
from asgrad.tensor.ir.scalar import Expr
from asgrad.tensor.ops._common import broadcast_shapes, require_float, same_dtype
from asgrad.tensor.ops._elementwise_cases import (
    binary_cases,
    cast_cases,
    clamp_cases,
    compare_cases,
    gelu_backward_cases,
    kinked_at_zero,
    nonzero,
    normal,
    positive,
    sigmoid_cases,
    softplus_cases,
    unary_cases,
    where_cases,
)
from asgrad.tensor.ops._erf import erf_f32, gelu_backward_f32, gelu_f32
from asgrad.tensor.ops._math_cases import minmax_cases, pow_cases
from asgrad.tensor.registry import (
    Attr,
    Attrs,
    CasesFn,
    IntoKernel,
    KernelFn,
    OpDef,
    TensorType,
    get_op,
    register_op,
)


# -- type rules ---------------------------------------------------------------------------
def _infer_unary_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return types[0]


def _infer_unary_numeric(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if types[0].dtype == "bool":
        raise DTypeError(f"input is bool ({types[0]}); cast it to a number first")
    return types[0]


def _infer_binary(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    dtype = same_dtype(types)
    if dtype == "bool":
        raise DTypeError("arithmetic on bool values; cast them to a number first")
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), dtype)


def _infer_binary_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    out = _infer_binary(types, attrs)
    require_float(out, "operands")
    return out


def _infer_binary_any(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Two operands of one dtype, bools included (maximum, minimum)."""
    return TensorType(broadcast_shapes(*(t.shape for t in types)), same_dtype(types))


def _bitwise_type(types: Sequence[TensorType], ints: bool) -> TensorType:
    """Integers or bools (``&``, ``|``, ``^``, ``~``); ``ints``: integers only."""
    out = _infer_binary_any(types, {}) if len(types) == 2 else types[0]
    if not (is_int(out.dtype) or (out.dtype == "bool" and not ints)):
        want = "integer" if ints else "integer or bool"
        raise DTypeError(f"operands must be {want}, got {out}; cast them first")
    return out


def _infer_bitwise(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _bitwise_type(types, ints=False)


def _infer_int_binary(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _bitwise_type(types, ints=True)


def _infer_logical(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Any dtypes (nonzero is true), a bool result."""
    return TensorType(broadcast_shapes(*(t.shape for t in types)), "bool")


def _infer_isclose(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(_infer_binary_float(types, attrs).shape, "bool")


def _infer_predicate(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[0].shape, "bool")


def _infer_compare(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    same_dtype(types)
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), "bool")


def _infer_where(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    cond, a, b = types
    if cond.dtype != "bool":
        raise DTypeError(f"condition must be bool, got {cond}; compare values to get one")
    dtype = same_dtype([a, b], "the two branches")
    return TensorType(broadcast_shapes(cond.shape, a.shape, b.shape), dtype)


def _infer_cast(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[0].shape, as_dtype(attrs["dtype"]))


def _infer_clamp(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, hi = attrs["min"], attrs["max"]
    if lo is None and hi is None:
        raise ShapeError("give min, max or both")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"min {lo} is greater than max {hi}")
    return _infer_unary_numeric(types, attrs)


def _infer_gelu_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    require_float(x)
    same_dtype(types, "gradient and input")
    if g.shape != x.shape:
        raise ShapeError(f"gradient is {g}; it must have the shape of input {x}")
    return x


# -- expressions --------------------------------------------------------------------------
# What each op computes per element (asgrad.tensor.ir.scalar): every backend renders it.
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_A = 0.044715


def sigmoid_expr(x: Expr) -> Expr:
    """``1 / (1 + e**-x)`` for ``x >= 0``, ``e**x / (1 + e**x)`` below, from one
    ``e = e**-|x|``: no exponential overflows, and a small result keeps its relative
    precision (float32 ``sigmoid(-20)`` is 2.06e-9, not 0). NaN stays NaN."""
    e = s.exp(-abs(x))
    return s.where(s.lt(x, 0), e, 1) / (e + 1)


def _gelu_expr(x: Expr, approximate: str) -> Expr:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + s.tanh(_SQRT_2_OVER_PI * (x + _TANH_A * x * x * x)))
    return 0.5 * x * (1.0 + s.erf(x * _INV_SQRT_2))


def _gelu_backward_expr(g: Expr, x: Expr, approximate: str) -> Expr:
    if approximate == "tanh":
        x2 = x * x
        t = s.tanh(_SQRT_2_OVER_PI * (x + _TANH_A * x * x2))
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (
            _SQRT_2_OVER_PI * (1.0 + 3.0 * _TANH_A * x2)
        )
        return g * d
    cdf = 0.5 * (1.0 + s.erf(x * _INV_SQRT_2))
    pdf = s.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _leaky_relu_expr(x: Expr, alpha: float) -> Expr:
    return s.where(s.gt(x, 0), x, x * alpha)


def _elu_expr(x: Expr, alpha: float) -> Expr:
    return s.where(s.gt(x, 0), x, alpha * s.expm1(s.minimum(x, 0)))


# softplus is x where beta x > 20 (PyTorch's threshold); below beta x = -1000 it and its
# gradient underflow to 0. beta x is formed on x clipped to that range: no overflow.
SOFTPLUS_THRESHOLD, SOFTPLUS_FLOOR = 20.0, -1000.0


def softplus_bounds(beta: float) -> tuple[float, float]:
    """The interval of ``x`` where ``SOFTPLUS_FLOOR <= beta * x <= SOFTPLUS_THRESHOLD``."""
    a, b = SOFTPLUS_FLOOR / beta, SOFTPLUS_THRESHOLD / beta
    return (a, b) if beta > 0 else (b, a)


def _softplus_expr(x: Expr, beta: float) -> Expr:
    """``x`` where ``beta * x > 20``, else ``(max(bx, 0) + log1p(e**-|bx|)) / beta``."""
    low, high = softplus_bounds(beta)
    above = s.gt(x, high) if beta > 0 else s.lt(x, low)
    bx = s.clip(x, low, high) * beta  # softplus(3e38, beta=2) is 3e38, not inf
    soft = (s.maximum(bx, 0) + s.log1p(s.exp(-abs(bx)))) / beta
    return s.where(above, x, soft)


def _cast_expr(x: Expr, dtype: str) -> Expr:
    return s.cast(x, as_dtype(dtype))


# -- kernels --------------------------------------------------------------------------------
def rendered_kernel(name: str) -> KernelFn:
    """The numpy kernel of op ``name`` that is its expression rendered by numpy: the
    op's attributes completed by its schema, the result dtype from its shape rule."""
    built: dict[Any, tuple[str, Expr]] = {}  # (input dtypes, attrs) -> result dtype, expr

    def kernel(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        xs = [np.asarray(a) for a in arrays]
        key = (*(x.dtype.name for x in xs), *sorted(attrs.items()))
        found = built.get(key)
        if found is None:
            op = get_op(name)
            assert op.expression is not None
            full = op.normalize_attrs(attrs)
            dtype = op.infer([TensorType(x.shape, x.dtype.name) for x in xs], full).dtype
            found = built[key] = (dtype, s.build(op.expression, len(xs), full, dtype))
        return s.render_numpy(found[1], xs, found[0])

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"``{name}``'s expression, rendered by numpy."
    return kernel


def primitive_kernel(expression: Callable[..., Expr], arity: int) -> KernelFn | None:
    """The numpy function of the one primitive that ``expression`` (of an op without
    attributes) applies to the op's inputs in order (``add(x0, x1)``: ``np.add``), or
    None. The CPU backend writes a numpy ufunc's result in place, so such an op keeps
    the ufunc as its kernel."""
    e = expression(*(s.arg(i) for i in range(arity)))
    if e.op in s.PRIMITIVES and e.args == tuple(s.arg(i) for i in range(arity)):
        return s.PRIMITIVES[e.op].numpy
    return None


def _int_division(fn: Callable[..., Any], op: str) -> KernelFn:
    """numpy's ``fn`` (// or %), with a zero integer divisor an error, not numpy's 0."""

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if b.dtype.kind in "iu" and not b.all():
            raise IntegerArithmeticError(f"{op}: integer division by zero; mask the divisor")
        return np.asarray(fn(a, b))

    return kernel


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.dtype.kind in "iu" and (b < 0).any():
        raise IntegerArithmeticError("pow: an integer to a negative power; cast to float first")
    return np.asarray(np.power(a, b))


def _gelu_backward(g: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    """The float32 path (:func:`gelu_backward_f32`) for exact float32 arrays, else the
    expression."""
    if approximate == "none" and x.dtype == np.float32 and x.ndim and g.dtype == np.float32:
        return gelu_backward_f32(g, x)
    return _GELU_BACKWARD(g, x, approximate=approximate)


_GELU_BACKWARD = rendered_kernel("gelu_backward")


def _exact_gelu(attrs: Attrs) -> bool:
    """Whether a GELU node is the exact (erf) form, which the float32 paths compute."""
    return bool(attrs["approximate"] == "none")


# -- attributes -----------------------------------------------------------------------------
def _finite_nonzero(value: float) -> str | None:
    return None if value != 0.0 and math.isfinite(value) else "must be a finite non-zero number"


def _one_of(*options: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in options else f"must be one of {', '.join(map(repr, options))}"

    return check


def _dtype_name(value: Any) -> str | None:
    try:
        as_dtype(value)
    except DTypeError as exc:
        return f"is not a dtype asgrad has ({exc})"
    return None


APPROXIMATE = Attr(
    name="approximate",
    kind=str,
    default="none",
    check=_one_of("none", "tanh"),
    doc="'none': exact (erf); 'tanh': the tanh approximation",
)


# -- registration ---------------------------------------------------------------------------------
def _elementwise(
    name: str, kernel: KernelFn | None, doc: str, cases: CasesFn, **fields: Any
) -> None:
    """Register an elementwise op; ``fields`` are further :class:`OpDef` fields, by keyword
    (by default one float input, no attributes). A kernel of None: the op's kernel is its
    ``expression``, rendered by numpy (the primitive's numpy function for an op that is
    one primitive of its inputs)."""
    fields = {"arity": 1, "infer": _infer_unary_float, "attrs": (), **fields}
    if kernel is None:
        expression = fields["expression"]
        simple = not fields["attrs"] and primitive_kernel(expression, fields["arity"])
        kernel = simple or rendered_kernel(name)
    register_op(
        OpDef(name=name, family="elementwise", kernel=kernel, doc=doc, cases=cases, **fields)
    )


def _binary(name: str, kernel: KernelFn | None, doc: str, cases: CasesFn, **fields: Any) -> None:
    _elementwise(name, kernel, doc, cases, **{"arity": 2, "infer": _infer_binary, **fields})


_T1, _T2 = (2e-5, 1e-6), (2e-5, 2e-6)
_elementwise("neg", None, "-x", unary_cases(normal), infer=_infer_unary_numeric, expression=s.neg)
_elementwise("exp", None, "e**x", unary_cases(normal, large=80.0), tolerance=_T1, expression=s.exp)
_elementwise(
    "log", None, "natural logarithm", unary_cases(positive), tolerance=_T1, expression=s.log
)
_elementwise("sqrt", None, "square root", unary_cases(positive), expression=s.sqrt)
_elementwise(
    "abs", None, "|x|", unary_cases(kinked_at_zero), infer=_infer_unary_numeric, expression=s.abs
)
_elementwise(
    "sign",
    None,
    "-1, 0 or 1 (zero gradient)",
    unary_cases(kinked_at_zero),
    infer=_infer_unary_numeric,
    differentiable=False,
    expression=s.sign,
)
_elementwise(
    "stop_gradient",
    np.positive,  # a copy of x, written in place where the CPU backend may
    "x; no gradient flows through it (removed when compiled)",
    unary_cases(normal),
    infer=_infer_unary_numeric,
    differentiable=False,
    identity_if_same_type=True,
    expression=lambda x: x,
)
_elementwise("sin", None, "sine", unary_cases(normal), tolerance=_T2, expression=s.sin)
_elementwise("cos", None, "cosine", unary_cases(normal), tolerance=_T2, expression=s.cos)
_elementwise(
    "tanh",
    None,
    "hyperbolic tangent",
    unary_cases(normal, large=60),
    tolerance=_T2,
    expression=s.tanh,
)
_elementwise(
    "sigmoid",
    None,
    "1 / (1 + e**-x), as e**x / (1 + e**x) for x < 0 (no underflow to 0 near -20)",
    sigmoid_cases,
    tolerance=_T2,
    expression=sigmoid_expr,
)
_elementwise(
    "relu",
    None,
    "max(x, 0)",
    unary_cases(kinked_at_zero),
    infer=_infer_unary_numeric,
    expression=lambda x: s.maximum(x, 0),
)
_elementwise(
    "leaky_relu",
    None,
    "x if x > 0 else alpha * x",
    unary_cases(kinked_at_zero, [{"alpha": 0.01}, {"alpha": 0.2}]),
    attrs=(Attr(name="alpha", kind=float, default=0.01, doc="the slope below 0"),),
    expression=_leaky_relu_expr,
)
_elementwise(
    "gelu",
    None,
    "x * Phi(x), exact (erf) or tanh approximation",
    unary_cases(normal, [{"approximate": "none"}, {"approximate": "tanh"}], large=30.0),
    tolerance=(5e-5, 5e-6),
    into=IntoKernel(fn=gelu_f32, work=3, exact=False, when=_exact_gelu),
    attrs=(APPROXIMATE,),
    expression=_gelu_expr,
)
_elementwise(
    "gelu_backward",
    _gelu_backward,
    "GELU's input gradient g * GELU'(x), exact (erf) or tanh",
    gelu_backward_cases,
    arity=2,
    infer=_infer_gelu_backward,
    tolerance=(5e-5, 5e-6),
    composite=True,
    fresh_result=True,
    into=IntoKernel(fn=gelu_backward_f32, work=2, exact=False, when=_exact_gelu),
    attrs=(APPROXIMATE,),
    expression=_gelu_backward_expr,
)
_elementwise(
    "erf",
    None,
    "the error function",
    unary_cases(normal),
    tolerance=(1e-5, 2e-6),
    into=IntoKernel(fn=erf_f32, work=2, exact=False),
    expression=s.erf,
)
_elementwise(
    "silu",
    None,
    "x * sigmoid(x)",
    sigmoid_cases,
    tolerance=_T2,
    expression=lambda x: x * sigmoid_expr(x),
)
_elementwise(
    "elu",
    None,
    "x if x > 0 else alpha * (e**x - 1)",
    unary_cases(kinked_at_zero, [{"alpha": 1.0}, {"alpha": 0.5}]),
    tolerance=_T2,
    attrs=(Attr(name="alpha", kind=float, default=1.0, doc="the scale of the negative part"),),
    expression=_elu_expr,
)
_elementwise(
    "softplus",
    None,
    "log(1 + e**(beta x)) / beta; x where beta x > 20 (PyTorch's threshold)",
    softplus_cases,
    tolerance=_T2,
    attrs=(Attr(name="beta", kind=float, default=1.0, check=_finite_nonzero, doc="sharpness"),),
    expression=_softplus_expr,
)
_elementwise(
    "clamp",
    None,
    "clip to [min, max]",
    clamp_cases,
    infer=_infer_clamp,
    attrs=(
        Attr(name="min", kind=numbers.Real, default=None, optional=True, doc="lower bound"),
        Attr(name="max", kind=numbers.Real, default=None, optional=True, doc="upper bound"),
    ),
    expression=lambda x, **bounds: s.clip(x, bounds["min"], bounds["max"]),
)
_elementwise(
    "cast",
    None,
    "convert to another dtype",
    cast_cases,
    infer=_infer_cast,
    tolerance=(1e-6, 1e-6),
    identity_if_same_type=True,
    attrs=(Attr(name="dtype", check=_dtype_name, doc="the dtype to convert to"),),
    expression=_cast_expr,
)

_binary("add", None, "a + b", binary_cases(), expression=s.add)
_binary("sub", None, "a - b", binary_cases(), expression=s.sub)
_binary("mul", None, "a * b", binary_cases(), expression=s.mul)
_binary(
    "div",
    None,
    "a / b (floats)",
    binary_cases(normal, nonzero),
    infer=_infer_binary_float,
    expression=s.div,
)
_binary(
    "pow",
    _pow,
    "a ** b (integers: a negative power is an error)",
    pow_cases,
    tolerance=(5e-5, 1e-6),
    expression=s.pow,
)
_binary(
    "maximum",
    None,
    "elementwise max",
    minmax_cases,
    infer=_infer_binary_any,
    expression=s.maximum,
)
_binary(
    "minimum",
    None,
    "elementwise min",
    minmax_cases,
    infer=_infer_binary_any,
    expression=s.minimum,
)
for _name, _expr, _doc in (
    ("equal", s.eq, "a == b"),
    ("not_equal", s.ne, "a != b"),
    ("less", s.lt, "a < b"),
    ("less_equal", s.le, "a <= b"),
    ("greater", s.gt, "a > b"),
    ("greater_equal", s.ge, "a >= b"),
):
    _binary(
        _name,
        None,
        _doc,
        compare_cases,
        infer=_infer_compare,
        differentiable=False,
        expression=_expr,
    )
_elementwise(
    "where",
    None,
    "cond ? a : b",
    where_cases,
    arity=3,
    infer=_infer_where,
    tolerance=(1e-6, 1e-7),
    expression=s.where,
)
