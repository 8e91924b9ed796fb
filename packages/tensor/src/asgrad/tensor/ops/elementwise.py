"""Elementwise ops: unary math and activations, binary arithmetic, comparisons, where.

Each op states what it computes per element once, as a scalar expression
(`asgrad.tensor.ir.scalar`, the ``expression`` of its [`OpDef`][asgrad.tensor.OpDef]); its numpy
kernel is that expression rendered by numpy (or the primitive's own ufunc), and the
other backends render theirs from it. Test oracles written independently are in the
tests (``test_op_values.py``).

``gelu_backward(g, x)`` is GELU's input gradient ``g * GELU'(x)`` as one composite
op (its own gradient rule gives higher-order gradients). ``erf``, ``gelu`` and
``gelu_backward`` have float32 paths (`asgrad.tensor.ops._erf`) that the CPU
code generator takes through `IntoKernel`. The test
cases are in `asgrad.tensor.ops._elementwise_cases`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from asgrad.tensor.ir import scalar as s
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.registry import Attr, Attrs, IntoKernel
from asgrad.tensor.ir.scalar import Expr
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
from asgrad.tensor.ops.elementwise_kernels import (
    _binary,
    _dtype_name,
    _elementwise,
    _finite_nonzero,
    _one_of,
    _pow,
    rendered_kernel,
)
from asgrad.tensor.ops.elementwise_types import (
    _infer_binary_any,
    _infer_binary_float,
    _infer_cast,
    _infer_clamp,
    _infer_compare,
    _infer_gelu_backward,
    _infer_unary_numeric,
    _infer_where,
)

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
    z = x * _INV_SQRT_2
    a = abs(z)
    cdf = 0.5 * (1.0 + s.erf(z))
    # The density's exp(-x**2 / 2) as exp(-|z| * |z|): the exponential erf's float32
    # forms compute for z (the numpy path's `gelu_backward_f32`, the compiled
    # `_math32.erf32`), so that one serves both.
    pdf = s.exp(-(a * a)) * _INV_SQRT_2PI
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


# -- kernels and attributes -----------------------------------------------------------------
def _gelu_backward(g: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    """The float32 path (`gelu_backward_f32`) for exact float32 arrays, else the
    expression."""
    if approximate == "none" and x.dtype == np.float32 and x.ndim and g.dtype == np.float32:
        return gelu_backward_f32(g, x, approximate=approximate)
    return _GELU_BACKWARD(g, x, approximate=approximate)


_GELU_BACKWARD = rendered_kernel("gelu_backward")


def _exact_gelu(attrs: Attrs) -> bool:
    """Whether a GELU node is the exact (erf) form, which the float32 paths compute."""
    return bool(attrs["approximate"] == "none")


APPROXIMATE = Attr(
    name="approximate",
    kind=str,
    default="none",
    check=_one_of("none", "tanh"),
    doc="'none': exact (erf); 'tanh': the tanh approximation",
)


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
