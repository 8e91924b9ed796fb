"""Elementwise ops: unary math and activations, binary arithmetic, comparisons, where.

``gelu_backward(g, x)`` is GELU's input gradient ``g * GELU'(x)`` as one composite
op (its own gradient rule gives higher-order gradients). ``erf``, ``gelu`` and
``gelu_backward`` have float32 paths (`asgrad.tensor.ops._erf`) that the CPU
code generator takes through `IntoKernel`. The test
cases are in `asgrad.tensor.ops._elementwise_cases`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ArgumentError, DTypeError, IntegerArithmeticError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, require_float, same_dtype
from asgrad.tensor.ir.dtypes import as_dtype, is_int
from asgrad.tensor.ir.registry import (
    Attrs,
    CasesFn,
    IntoKernel,
    KernelFn,
    OpDef,
    TensorType,
    register_op,
)
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

try:  # scipy's erf is exact and fast; it is optional.
    from scipy.special import erf as _scipy_erf  # type: ignore[import-untyped]  # no stubs
except ImportError:  # pragma: no cover - depends on the environment
    _scipy_erf = None

_math_erf = np.frompyfunc(math.erf, 1, 1)


def erf_kernel(x: np.ndarray) -> np.ndarray:
    """The error function, exact to float64 rounding (scipy's, or ``math.erf``)."""
    if _scipy_erf is not None:
        return np.asarray(_scipy_erf(x), dtype=x.dtype)
    return np.asarray(_math_erf(x), dtype=x.dtype)


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


def _infer_bitwise(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Integers or bools (``&``, ``|``, ``^``, ``~``); ``ints=True``: integers only."""
    out = _infer_binary_any(types, {}) if len(types) == 2 else types[0]
    if not (is_int(out.dtype) or (out.dtype == "bool" and not attrs.get("ints"))):
        want = "integer" if attrs.get("ints") else "integer or bool"
        raise DTypeError(f"operands must be {want}, got {out}; cast them first")
    return out


def _infer_int_binary(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _infer_bitwise(types, {"ints": True})


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
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is None and hi is None:
        raise ShapeError("give min, max or both")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"min {lo} is greater than max {hi}")
    return _infer_unary_numeric(types, attrs)


def _infer_softplus(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    beta = float(attrs.get("beta", 1.0))
    if beta == 0.0 or not math.isfinite(beta):
        raise ArgumentError(f"softplus: beta must be a finite non-zero number, got {beta}")
    return _infer_unary_float(types, attrs)


def _infer_gelu_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    require_float(x)
    same_dtype(types, "gradient and input")
    if g.shape != x.shape:
        raise ShapeError(f"gradient is {g}; it must have the shape of input {x}")
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise ShapeError(f"approximate must be 'none' or 'tanh', got {attrs['approximate']!r}")
    return x


# -- kernels --------------------------------------------------------------------------------
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_A = 0.044715


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + e**-x)`` for ``x >= 0``, ``e**x / (1 + e**x)`` below, from one
    ``e = e**-|x|``: no exponential overflows, and a small result keeps its relative
    precision (float32 ``sigmoid(-20)`` is 2.06e-9, not 0). NaN stays NaN."""
    e = np.exp(-np.abs(x))
    out: np.ndarray = np.where(x < 0, e, 1) / (e + 1)
    return out


def _silu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x * _sigmoid(x)
    return out


def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        out: np.ndarray = 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
        return out
    return 0.5 * x * (1.0 + erf_kernel(x * (1.0 / math.sqrt(2.0))))


def _gelu_backward(g: np.ndarray, x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _TANH_A * x * x2))
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (
            _SQRT_2_OVER_PI * (1.0 + 3.0 * _TANH_A * x2)
        )
        out: np.ndarray = g * d
        return out.astype(x.dtype, copy=False)
    if x.dtype == np.float32 and x.ndim and g.dtype == np.float32:
        return gelu_backward_f32(g, x)
    cdf = 0.5 * (1.0 + erf_kernel(x * _INV_SQRT_2))
    pdf = np.exp(-0.5 * x * x) * _INV_SQRT_2PI
    result: np.ndarray = g * (cdf + x * pdf)
    return result.astype(x.dtype, copy=False)


def _exact_gelu(attrs: Attrs) -> bool:
    """Whether a GELU node is the exact (erf) form, which the float32 paths compute."""
    return bool(attrs.get("approximate", "none") == "none")


def _leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    return np.where(x > 0, x, x * alpha)


def _elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# softplus is x where beta x > 20 (PyTorch's threshold); below beta x = -1000 it and its
# gradient underflow to 0. beta x is formed on x clipped to that range: no overflow.
SOFTPLUS_THRESHOLD, SOFTPLUS_FLOOR = 20.0, -1000.0


def softplus_bounds(beta: float) -> tuple[float, float]:
    """The interval of ``x`` where ``SOFTPLUS_FLOOR <= beta * x <= SOFTPLUS_THRESHOLD``."""
    a, b = SOFTPLUS_FLOOR / beta, SOFTPLUS_THRESHOLD / beta
    return (a, b) if beta > 0 else (b, a)


def _softplus(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """``x`` where ``beta * x > 20``, else ``(max(bx, 0) + log1p(e**-|bx|)) / beta``."""
    low, high = softplus_bounds(beta)
    above = x > high if beta > 0 else x < low
    bx = np.clip(x, low, high) * beta  # softplus(3e38, beta=2) is 3e38, not inf
    soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
    out: np.ndarray = np.where(above, x, soft)
    return out


def _clamp(x: np.ndarray, min: float | None = None, max: float | None = None) -> np.ndarray:
    out: np.ndarray = np.clip(x, min, max)
    return out


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(dtype)


def _int_division(fn: Callable[..., Any], op: str) -> KernelFn:
    """numpy's ``fn`` (// or %), with a zero integer divisor an error, not numpy's 0."""

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if b.dtype.kind in "iu" and not b.all():
            raise IntegerArithmeticError(f"{op}: integer division by zero; mask the divisor")
        return np.asarray(fn(a, b))

    return kernel


def _frac(x: np.ndarray) -> np.ndarray:
    return np.asarray(x - np.trunc(x))


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.dtype.kind in "iu" and (b < 0).any():
        raise IntegerArithmeticError("pow: an integer to a negative power; cast to float first")
    return np.asarray(np.power(a, b))


# -- registration ---------------------------------------------------------------------------------
def _elementwise(name: str, kernel: KernelFn, doc: str, cases: CasesFn, **fields: Any) -> None:
    """Register an elementwise op; ``fields`` are further [`OpDef`][asgrad.tensor.OpDef] fields, by
    keyword (by default one float input)."""
    fields = {"arity": 1, "infer": _infer_unary_float, **fields}
    register_op(
        OpDef(name=name, family="elementwise", kernel=kernel, doc=doc, cases=cases, **fields)
    )


def _binary(name: str, kernel: KernelFn, doc: str, cases: CasesFn, **fields: Any) -> None:
    _elementwise(name, kernel, doc, cases, **{"arity": 2, "infer": _infer_binary, **fields})


_T1, _T2 = (2e-5, 1e-6), (2e-5, 2e-6)
_elementwise("neg", np.negative, "-x", unary_cases(normal), infer=_infer_unary_numeric)
_elementwise("exp", np.exp, "e**x", unary_cases(normal, large=80.0), tolerance=_T1)
_elementwise("log", np.log, "natural logarithm", unary_cases(positive), tolerance=_T1)
_elementwise("sqrt", np.sqrt, "square root", unary_cases(positive))
_elementwise("abs", np.abs, "|x|", unary_cases(kinked_at_zero), infer=_infer_unary_numeric)
_elementwise(
    "sign",
    np.sign,
    "-1, 0 or 1 (zero gradient)",
    unary_cases(kinked_at_zero),
    infer=_infer_unary_numeric,
    differentiable=False,
)
_elementwise(
    "stop_gradient",
    np.positive,  # a copy of x
    "x; no gradient flows through it (removed when compiled)",
    unary_cases(normal),
    infer=_infer_unary_numeric,
    differentiable=False,
    identity_if_same_type=True,
)
_elementwise("sin", np.sin, "sine", unary_cases(normal), tolerance=_T2)
_elementwise("cos", np.cos, "cosine", unary_cases(normal), tolerance=_T2)
_elementwise("tanh", np.tanh, "hyperbolic tangent", unary_cases(normal, large=60), tolerance=_T2)
_elementwise(
    "sigmoid",
    _sigmoid,
    "1 / (1 + e**-x), as e**x / (1 + e**x) for x < 0 (no underflow to 0 near -20)",
    sigmoid_cases,
    tolerance=_T2,
)
_elementwise(
    "relu",
    lambda x: np.maximum(x, 0),
    "max(x, 0)",
    unary_cases(kinked_at_zero),
    infer=_infer_unary_numeric,
)
_elementwise(
    "leaky_relu",
    _leaky_relu,
    "x if x > 0 else alpha * x",
    unary_cases(kinked_at_zero, [{"alpha": 0.01}, {"alpha": 0.2}]),
)
_elementwise(
    "gelu",
    _gelu,
    "x * Phi(x), exact (erf) or tanh approximation",
    unary_cases(normal, [{"approximate": "none"}, {"approximate": "tanh"}], large=30.0),
    tolerance=(5e-5, 5e-6),
    into=IntoKernel(fn=gelu_f32, work=3, exact=False, when=_exact_gelu),
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
)
_elementwise(
    "erf",
    erf_kernel,
    "the error function",
    unary_cases(normal),
    tolerance=(1e-5, 2e-6),
    into=IntoKernel(fn=erf_f32, work=2, exact=False),
)
_elementwise("silu", _silu, "x * sigmoid(x)", sigmoid_cases, tolerance=_T2)
_elementwise(
    "elu",
    _elu,
    "x if x > 0 else alpha * (e**x - 1)",
    unary_cases(kinked_at_zero, [{"alpha": 1.0}, {"alpha": 0.5}]),
    tolerance=_T2,
)
_elementwise(
    "softplus",
    _softplus,
    "log(1 + e**(beta x)) / beta; x where beta x > 20 (PyTorch's threshold)",
    softplus_cases,
    infer=_infer_softplus,
    tolerance=_T2,
)
_elementwise("clamp", _clamp, "clip to [min, max]", clamp_cases, infer=_infer_clamp)
_elementwise(
    "cast",
    _cast,
    "convert to another dtype",
    cast_cases,
    infer=_infer_cast,
    tolerance=(1e-6, 1e-6),
    identity_if_same_type=True,
)

_binary("add", np.add, "a + b", binary_cases())
_binary("sub", np.subtract, "a - b", binary_cases())
_binary("mul", np.multiply, "a * b", binary_cases())
_binary(
    "div", np.divide, "a / b (floats)", binary_cases(normal, nonzero), infer=_infer_binary_float
)
_binary(
    "pow",
    _pow,
    "a ** b (integers: a negative power is an error)",
    pow_cases,
    tolerance=(5e-5, 1e-6),
)
_binary("maximum", np.maximum, "elementwise max", minmax_cases, infer=_infer_binary_any)
_binary("minimum", np.minimum, "elementwise min", minmax_cases, infer=_infer_binary_any)
for _name, _kernel, _doc in (
    ("equal", np.equal, "a == b"),
    ("not_equal", np.not_equal, "a != b"),
    ("less", np.less, "a < b"),
    ("less_equal", np.less_equal, "a <= b"),
    ("greater", np.greater, "a > b"),
    ("greater_equal", np.greater_equal, "a >= b"),
):
    _binary(_name, _kernel, _doc, compare_cases, infer=_infer_compare, differentiable=False)
_elementwise(
    "where",
    np.where,
    "cond ? a : b",
    where_cases,
    arity=3,
    infer=_infer_where,
    tolerance=(1e-6, 1e-7),
)
