"""Elementwise ops: unary math and activations, binary arithmetic, comparisons, where.

``gelu_backward(g, x)`` is GELU's input gradient ``g * GELU'(x)`` as one composite
op (its own gradient rule gives higher-order gradients). ``erf``, ``gelu`` and
``gelu_backward`` have float32 paths (:mod:`asgrad.tensor.ops._erf`) that the CPU
code generator takes through :class:`~asgrad.tensor.registry.IntoKernel`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.dtypes import as_dtype
from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ops._common import (
    away_from,
    broadcast_shapes,
    randn,
    require_float,
    same_dtype,
    uniform,
)
from asgrad.tensor.ops._erf import erf_f32, gelu_backward_f32, gelu_f32
from asgrad.tensor.registry import (
    Attrs,
    CasesFn,
    IntoKernel,
    KernelFn,
    OpCase,
    OpDef,
    TensorType,
    register_op,
)

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
    return 0.5 * (1.0 + np.tanh(0.5 * x))


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


def _softplus(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    return np.logaddexp(0, x * beta) * (1.0 / beta)


def _clamp(x: np.ndarray, min: float | None = None, max: float | None = None) -> np.ndarray:
    out: np.ndarray = np.clip(x, min, max)
    return out


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(dtype)


# -- cases ------------------------------------------------------------------------------------
_UNARY_SHAPES = ((3, 4), (2, 1, 5), ())


def _unary_cases(
    make: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray],
    attrs: Sequence[dict[str, object]] = ({},),
    large: float | None = None,
) -> CasesFn:
    def cases(rng: np.random.Generator) -> list[OpCase]:
        out = [
            OpCase((make(rng, s),), a, label=f"{list(s)} {a}") for s in _UNARY_SHAPES for a in attrs
        ]
        if large is not None:
            big = rng.uniform(-large, large, (4, 33))
            out.append(OpCase((big,), attrs[0], grad=False, label="large magnitudes"))
        return out

    return cases


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return randn(rng, *shape)


def _positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return uniform(rng, 0.3, 3.0, *shape)


def _kinked_at_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return away_from(rng, [0.0], *shape)


_BINARY_SHAPES = (
    ((3, 4), (3, 4)),
    ((2, 3, 4), (3, 1)),
    ((4, 1), (1, 5)),
    ((), (2, 3)),
    ((5,), (2, 1, 5)),
)


def _binary_cases(
    make_a: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] = _normal,
    make_b: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] = _normal,
) -> CasesFn:
    def cases(rng: np.random.Generator) -> list[OpCase]:
        return [
            OpCase((make_a(rng, sa), make_b(rng, sb)), label=f"{list(sa)} {list(sb)}")
            for sa, sb in _BINARY_SHAPES
        ]

    return cases


def _nonzero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    out: np.ndarray = uniform(rng, 0.5, 2.0, *shape) * rng.choice([-1.0, 1.0], shape)
    return out


def _compare_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for sa, sb in _BINARY_SHAPES:
        a = rng.integers(-2, 3, sa).astype(np.float64)
        b = rng.integers(-2, 3, sb).astype(np.float64)
        out.append(OpCase((a, b), grad=False, label=f"{list(sa)} {list(sb)}"))
    return out


def _where_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((rng.random((3, 4)) > 0.5, randn(rng, 3, 4), randn(rng, 3, 4)), wrt=(1, 2)),
        OpCase((rng.random((3, 1)) > 0.5, randn(rng, 1, 4), randn(rng, 2, 3, 4)), wrt=(1, 2)),
        OpCase((rng.random((4,)) > 0.5, randn(rng, 3, 4), randn(rng)), wrt=(1, 2)),
    ]


def _cast_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 4, scale=3.0)
    return [
        OpCase((x,), {"dtype": "float32"}, grad=False, label="to float32"),
        OpCase((x,), {"dtype": "int64"}, grad=False, label="to int64"),
        OpCase((x > 0,), {"dtype": "float64"}, grad=False, label="bool to float"),
    ]


def _gelu_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for approximate in ("none", "tanh"):
        a = {"approximate": approximate}
        out += [
            OpCase((randn(rng, 3, 4), randn(rng, 3, 4) * 2.0), a, label=f"(3, 4) {approximate}"),
            OpCase((randn(rng, 2, 3, 5), randn(rng, 2, 3, 5)), a, label=f"rank 3 {approximate}"),
            OpCase((randn(rng), randn(rng)), a, label=f"scalar {approximate}"),
        ]
    big = (randn(rng, 4, 33), uniform(rng, -30.0, 30.0, 4, 33))
    out.append(OpCase(big, {"approximate": "none"}, grad=False, label="large magnitudes"))
    return out


def _clamp_cases(rng: np.random.Generator) -> list[OpCase]:
    x = away_from(rng, [-0.5, 0.7], 3, 4)
    return [
        OpCase((x,), {"min": -0.5, "max": 0.7}),
        OpCase((x,), {"min": -0.5}),
        OpCase((x,), {"max": 0.7}),
    ]


# -- registration ---------------------------------------------------------------------------------
def _elementwise(name: str, kernel: KernelFn, doc: str, cases: CasesFn, **fields: Any) -> None:
    """Register an elementwise op; ``fields`` are further :class:`OpDef` fields, by keyword
    (by default one float input)."""
    fields = {"arity": 1, "infer": _infer_unary_float, **fields}
    register_op(
        OpDef(name=name, family="elementwise", kernel=kernel, doc=doc, cases=cases, **fields)
    )


def _binary(name: str, kernel: KernelFn, doc: str, cases: CasesFn, **fields: Any) -> None:
    _elementwise(name, kernel, doc, cases, **{"arity": 2, "infer": _infer_binary, **fields})


_T1, _T2 = (2e-5, 1e-6), (2e-5, 2e-6)
_elementwise("neg", np.negative, "-x", _unary_cases(_normal), infer=_infer_unary_numeric)
_elementwise("exp", np.exp, "e**x", _unary_cases(_normal, large=80.0), tolerance=_T1)
_elementwise("log", np.log, "natural logarithm", _unary_cases(_positive), tolerance=_T1)
_elementwise("sqrt", np.sqrt, "square root", _unary_cases(_positive))
_elementwise("abs", np.abs, "|x|", _unary_cases(_kinked_at_zero), infer=_infer_unary_numeric)
_elementwise(
    "sign",
    np.sign,
    "-1, 0 or 1 (zero gradient)",
    _unary_cases(_kinked_at_zero),
    infer=_infer_unary_numeric,
    differentiable=False,
)
_elementwise("sin", np.sin, "sine", _unary_cases(_normal), tolerance=_T2)
_elementwise("cos", np.cos, "cosine", _unary_cases(_normal), tolerance=_T2)
_elementwise("tanh", np.tanh, "hyperbolic tangent", _unary_cases(_normal, large=60), tolerance=_T2)
_elementwise("sigmoid", _sigmoid, "1 / (1 + e**-x)", _unary_cases(_normal, large=60), tolerance=_T2)
_elementwise(
    "relu",
    lambda x: np.maximum(x, 0),
    "max(x, 0)",
    _unary_cases(_kinked_at_zero),
    infer=_infer_unary_numeric,
)
_elementwise(
    "leaky_relu",
    _leaky_relu,
    "x if x > 0 else alpha * x",
    _unary_cases(_kinked_at_zero, [{"alpha": 0.01}, {"alpha": 0.2}]),
)
_elementwise(
    "gelu",
    _gelu,
    "x * Phi(x), exact (erf) or tanh approximation",
    _unary_cases(_normal, [{"approximate": "none"}, {"approximate": "tanh"}], large=30.0),
    tolerance=(5e-5, 5e-6),
    into=IntoKernel(fn=gelu_f32, work=3, exact=False, when=_exact_gelu),
)
_elementwise(
    "gelu_backward",
    _gelu_backward,
    "GELU's input gradient g * GELU'(x), exact (erf) or tanh",
    _gelu_backward_cases,
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
    _unary_cases(_normal),
    tolerance=(1e-5, 2e-6),
    into=IntoKernel(fn=erf_f32, work=2, exact=False),
)
_elementwise(
    "silu", lambda x: x * _sigmoid(x), "x * sigmoid(x)", _unary_cases(_normal), tolerance=_T2
)
_elementwise(
    "elu",
    _elu,
    "x if x > 0 else alpha * (e**x - 1)",
    _unary_cases(_kinked_at_zero, [{"alpha": 1.0}, {"alpha": 0.5}]),
    tolerance=_T2,
)
_elementwise(
    "softplus",
    _softplus,
    "log(1 + e**(beta x)) / beta",
    _unary_cases(_normal, [{"beta": 1.0}, {"beta": 2.0}], large=60.0),
    tolerance=_T2,
)
_elementwise("clamp", _clamp, "clip to [min, max]", _clamp_cases, infer=_infer_clamp)
_elementwise(
    "cast",
    _cast,
    "convert to another dtype",
    _cast_cases,
    infer=_infer_cast,
    tolerance=(1e-6, 1e-6),
    identity_if_same_type=True,
)

_binary("add", np.add, "a + b", _binary_cases())
_binary("sub", np.subtract, "a - b", _binary_cases())
_binary("mul", np.multiply, "a * b", _binary_cases())
_binary(
    "div", np.divide, "a / b (floats)", _binary_cases(_normal, _nonzero), infer=_infer_binary_float
)
_binary(
    "pow",
    np.power,
    "a ** b (floats)",
    _binary_cases(_positive, _normal),
    infer=_infer_binary_float,
    tolerance=(5e-5, 1e-6),
)
_binary("maximum", np.maximum, "elementwise max", _binary_cases())
_binary("minimum", np.minimum, "elementwise min", _binary_cases())
for _name, _kernel, _doc in (
    ("equal", np.equal, "a == b"),
    ("not_equal", np.not_equal, "a != b"),
    ("less", np.less, "a < b"),
    ("less_equal", np.less_equal, "a <= b"),
    ("greater", np.greater, "a > b"),
    ("greater_equal", np.greater_equal, "a >= b"),
):
    _binary(_name, _kernel, _doc, _compare_cases, infer=_infer_compare, differentiable=False)
_elementwise(
    "where",
    np.where,
    "cond ? a : b",
    _where_cases,
    arity=3,
    infer=_infer_where,
    tolerance=(1e-6, 1e-7),
)
