"""Every registered op, every registry case: value, shape and dtype against numpy.

The references below are written independently of the kernels in
``asgrad.tensor.ops``; an op without a reference entry fails
:func:`test_every_op_has_a_reference`, so a new op must add one here.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, OpCase, OpDef, all_ops, compile

Reference = Callable[..., np.ndarray]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return np.asarray(0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3))))
    return np.asarray(x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0))))


def _gelu_backward(g: np.ndarray, x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        u = c * (x + 0.044715 * x**3)
        sech2 = 1.0 / np.cosh(u) ** 2
        return np.asarray(
            g * (0.5 * (1.0 + np.tanh(u)) + 0.5 * x * sech2 * c * (1.0 + 0.134145 * x**2))
        )
    phi = np.exp(-(x**2) / 2.0) / math.sqrt(2.0 * math.pi)
    return np.asarray(g * (0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * phi))


def _adam_ema(m: np.ndarray, g: np.ndarray, beta: float, square: bool = False) -> np.ndarray:
    return np.asarray(beta * m + (1.0 - beta) * (g**2 if square else g))


def _adam_update(
    p: np.ndarray, m: np.ndarray, v: np.ndarray, lr: Any, bc2: Any, *decay: Any, eps: float = 1e-8
) -> np.ndarray:
    shrink = decay[0] if decay else 1.0
    return np.asarray(p * shrink - lr * m / (np.sqrt(v) / bc2 + eps))


def _softplus(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    # log(1 + e^z) = max(z, 0) + log1p(e^-|z|), stable for the large cases.
    z = beta * x
    return np.asarray((np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.asarray(e / e.sum(axis=axis, keepdims=True))


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True)))


def _var(
    x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False, correction: float = 0
) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    n = math.prod(x.shape[a] for a in axis)
    return np.asarray(((x - mu) ** 2).sum(axis=axis, keepdims=keepdims) / (n - correction))


def _prod(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    rest = [a for a in range(x.ndim) if a not in axis]
    rows = np.transpose(x, rest + list(axis)).reshape(*(x.shape[a] for a in rest), -1)
    out = np.array([math.prod(r) for r in rows.reshape(-1, rows.shape[-1])], x.dtype)
    out = out.reshape(rows.shape[:-1])
    return np.expand_dims(out, axis) if keepdims else out


def _logsumexp(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    # in extended precision, shifted by a finite max; an all -inf row is -inf
    m = np.max(np.where(np.isfinite(x), x, -1e300), axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp((x - m).astype(np.longdouble)), axis=axis, keepdims=True))
    out = (s + m).astype(np.float64)
    return out if keepdims else np.squeeze(out, axis=axis)


def _sum_to_like(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    while g.ndim > x.ndim:
        g = g.sum(axis=0)
    for i, d in enumerate(x.shape):
        if d == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


def _scatter_slice(g: np.ndarray, x: np.ndarray, index: tuple[Any, ...]) -> np.ndarray:
    out = np.zeros_like(x, dtype=g.dtype)
    out[index] = g
    return out


def _scatter_add(g: np.ndarray, idx: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros(x.shape, dtype=g.dtype)
    lead: tuple[Any, ...] = (slice(None),) * axis
    for pos in np.ndindex(*idx.shape):
        at: tuple[Any, ...] = (*lead, int(idx[pos]))
        out[at] += g[(*lead, *pos)]
    return out


def _clamp(
    x: np.ndarray, min: float | None = None, max: float | None = None
) -> np.ndarray:  # the op's attribute names
    if min is not None:
        x = np.where(x < min, min, x)
    if max is not None:
        x = np.where(x > max, max, x)
    return x


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    flat = [int(x) ** int(y) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
    return np.array(flat, a.dtype).reshape(a.shape)


def _round(x: np.ndarray, decimals: int = 0) -> np.ndarray:
    # halves to even: Python's round, one element at a time, on the scaled value
    scale = 10.0**decimals
    flat = [v if not math.isfinite(v * scale) else round(v * scale) / scale for v in x.ravel()]
    return np.array(flat, x.dtype).reshape(x.shape)


def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    a, b = np.broadcast_arrays(a, b)
    out = []
    for x, s in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True):
        if left:  # the low bits of the exact product, as two's complement
            v = (x << s) % 2**bits if 0 <= s < bits else 0
            out.append(v - 2**bits if v >= 2 ** (bits - 1) else v)
        else:
            out.append(x >> s if 0 <= s < bits else (-1 if x < 0 else 0))
    return np.array(out, a.dtype).reshape(a.shape)


def _isclose(
    a: np.ndarray, b: np.ndarray, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    out = []
    for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True):
        if math.isnan(x) or math.isnan(y):
            out.append(equal_nan and math.isnan(x) and math.isnan(y))
        elif math.isinf(x) or math.isinf(y):
            out.append(x == y)
        else:
            out.append(abs(x - y) <= atol + rtol * abs(y))
    return np.array(out, bool).reshape(a.shape)


def _nan_to_num(
    x: np.ndarray, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> np.ndarray:
    big = np.finfo(x.dtype).max
    out = np.where(x == np.inf, big if posinf is None else posinf, x)
    out = np.where(x == -np.inf, -big if neginf is None else neginf, out)
    return np.where(x != x, nan, out)


def _floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    flat = [int(x) // int(y) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
    return np.array(flat, a.dtype).reshape(a.shape)


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    flat = [int(x) % int(y) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
    return np.array(flat, a.dtype).reshape(a.shape)


def _truth(x: np.ndarray) -> np.ndarray:
    return x != 0


def _lines(x: np.ndarray, axis: int) -> list[tuple[Any, ...]]:
    """The index of every 1-D line along ``axis``."""
    rest = [range(d) for i, d in enumerate(x.shape) if i != axis]
    out = []
    for pos in np.ndindex(*(len(r) for r in rest)):
        at: list[Any] = list(pos)
        at.insert(axis, slice(None))
        out.append(tuple(at))
    return out


def _scan(x: np.ndarray, axis: int, reverse: bool, step: Callable[..., Any]) -> np.ndarray:
    out = np.array(x, dtype=x.dtype, copy=True)
    for line in _lines(x, axis):
        values = list(x[line][::-1] if reverse else x[line])
        for k in range(1, len(values)):
            values[k] = step(values[k - 1], values[k])
        out[line] = values[::-1] if reverse else values
    return out


def _cumsum(x: np.ndarray, axis: int, reverse: bool = False) -> np.ndarray:
    wide = x.astype(np.int64) if x.dtype.kind in "iu" else x
    return _scan(wide, axis, reverse, operator.add)


def _cum_index(x: np.ndarray, axis: int, keeps: Callable[..., bool]) -> np.ndarray:
    out = np.zeros(x.shape, np.int64)
    for line in _lines(x, axis):
        best, at, got = None, 0, []
        for k, v in enumerate(x[line].tolist()):
            if best is None or v != v or keeps(v, best):
                best, at = v, k
            got.append(at)
        out[line] = got
    return out


def _ranked(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    # Python's sort is stable; NaN ranks above every number
    out = np.zeros(x.shape, np.int64)
    for line in _lines(x, axis):
        v = x[line].tolist()
        if descending:
            order = sorted(range(len(v)), key=lambda i: _neg(v[i]))
        else:
            order = sorted(range(len(v)), key=lambda i: (v[i] != v[i], v[i] if v[i] == v[i] else 0))
        out[line] = order
    return out


def _neg(v: Any) -> tuple[int, Any]:
    return (0, 0) if v != v else (1, -v)


def _argmax(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    out = np.argmax(x, axis=axis)
    return np.expand_dims(out, axis) if keepdims else out


REFERENCES: dict[str, Reference] = {
    # elementwise, unary
    "neg": lambda x: -x,
    "stop_gradient": lambda x: x + 0,
    "exp": np.exp,
    "log": np.log,
    "sqrt": lambda x: x**0.5,
    "abs": lambda x: np.where(x < 0, -x, x),
    "sign": lambda x: (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": lambda x: 1.0 - 2.0 / (np.exp(2.0 * np.clip(x, -300, 300)) + 1.0),
    "sigmoid": _sigmoid,
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "leaky_relu": lambda x, alpha=0.01: np.where(x > 0, x, alpha * x),
    "gelu": _gelu,
    "gelu_backward": _gelu_backward,
    "erf": _erf,
    "silu": lambda x: x * _sigmoid(x),
    "elu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1.0)),
    "softplus": _softplus,
    "clamp": _clamp,
    "cast": lambda x, dtype: x.astype(dtype),
    # elementwise, binary
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": lambda a, b: np.exp(b * np.log(a)) if a.dtype.kind == "f" else _int_pow(a, b),
    "maximum": lambda a, b: np.where(a >= b, a, b),
    "minimum": lambda a, b: np.where(a <= b, a, b),
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "where": lambda c, a, b: c * a + (1 - c) * b,
    # elementwise: rounding, tests, logic, integers (issue 13)
    "floor": lambda x: np.where(np.isfinite(x), -np.trunc(-x) - (np.trunc(x) > x), x),
    "ceil": lambda x: -np.floor(-x),
    "trunc": lambda x: np.where(np.isfinite(x), np.fix(x), x),
    "round": _round,
    "frac": lambda x: np.fmod(x, 1.0),
    "isnan": lambda x: x != x,
    "isinf": lambda x: np.abs(x) == np.inf,
    "isfinite": lambda x: (x == x) & (np.abs(x) != np.inf),
    "isclose": _isclose,
    "nan_to_num": _nan_to_num,
    "logical_and": lambda a, b: _truth(a) & _truth(b),
    "logical_or": lambda a, b: _truth(a) | _truth(b),
    "logical_xor": lambda a, b: _truth(a) != _truth(b),
    "logical_not": lambda x: ~_truth(x),
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "bitwise_not": lambda x: ~x,
    "left_shift": lambda a, b: _shift(a, b, left=True),
    "right_shift": lambda a, b: _shift(a, b, left=False),
    "floor_divide": _floor_div,
    "remainder": _mod,
    # reductions
    "sum": lambda x, axis, keepdims=False: x.sum(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims=False: (
        x.sum(axis=axis, keepdims=keepdims) / math.prod(x.shape[a] for a in axis)
    ),
    "max": lambda x, axis, keepdims=False: np.amax(x, axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims=False: (
        ~np.amax(~x, axis=axis, keepdims=keepdims)
        if x.dtype == bool
        else -np.amax(-x, axis=axis, keepdims=keepdims)
    ),
    "var": _var,
    "std": lambda x, axis, keepdims=False, correction=0: np.sqrt(
        _var(x, axis, keepdims, correction)
    ),
    "prod": _prod,
    "logsumexp": _logsumexp,
    "any": lambda x, axis, keepdims=False: np.count_nonzero(x, axis=axis, keepdims=keepdims) > 0,
    "all": lambda x, axis, keepdims=False: (
        np.count_nonzero(x == 0, axis=axis, keepdims=keepdims) == 0
    ),
    "argmin": lambda x, axis, keepdims=False: _argmax(-x, axis, keepdims),
    "argmax": _argmax,
    # scans and sorts (issue 13)
    "cumsum": _cumsum,
    "cumprod": lambda x, axis: _scan(x, axis, False, lambda a, b: a * b),
    "cummax": lambda x, axis: _scan(x, axis, False, lambda a, b: b if b >= a or b != b else a),
    "cummin": lambda x, axis: _scan(x, axis, False, lambda a, b: b if b <= a or b != b else a),
    "logcumsumexp": lambda x, axis, reverse=False: _scan(x, axis, reverse, np.logaddexp),
    "cummax_index": lambda x, axis: _cum_index(x, axis, operator.ge),
    "cummin_index": lambda x, axis: _cum_index(x, axis, operator.le),
    "sort": lambda x, axis, descending=False: np.take_along_axis(
        x, _ranked(x, axis, descending), axis
    ),
    "argsort": lambda x, axis, descending=False: _ranked(x, axis, descending),
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "size_ratio": lambda a, b: np.asarray(a.size / b.size),
    # linear algebra
    "matmul": lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
    # shape and index
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, axes: x.transpose(axes),
    "broadcast_to": lambda x, shape: x * np.ones(shape),
    "expand_dims": lambda x, axis: x.reshape(_inserted_shape(x.shape, axis)),
    "squeeze": lambda x, axis: x.reshape([d for i, d in enumerate(x.shape) if i not in axis]),
    "sum_to_like": _sum_to_like,
    "broadcast_like": lambda g, x: g * np.ones_like(x),
    "reshape_like": lambda g, x: g.reshape(x.shape),
    "slice": lambda x, index: x[index],
    "scatter_slice": _scatter_slice,
    "concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "gather": lambda x, idx, axis: np.take(x, idx, axis=axis),
    "scatter_add": _scatter_add,
    # optimizer updates
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
    "one_hot": lambda idx, depth, dtype="float32": np.eye(depth, dtype=dtype)[idx],
}


def _inserted_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> list[int]:
    out = list(shape)
    for a in sorted(axis):
        out.insert(a, 1)
    return out


def _non_leaf_ops() -> list[OpDef]:
    return [op for op in all_ops() if op.family != "leaf"]


def _op_cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(0)
    out: list[tuple[OpDef, OpCase]] = []
    for op in _non_leaf_ops():
        # An op without cases or a reference fails the two coverage tests below, once,
        # rather than every one of its cases.
        if op.cases is not None and op.name in REFERENCES:
            out.extend((op, case) for case in op.cases(rng))
    return out


OP_CASES = _op_cases()


def _case_id(item: tuple[OpDef, OpCase]) -> str:
    op, case = item
    return f"{op.name}[{case.label or case.attrs}]"


def _as(dtype: str, a: np.ndarray) -> np.ndarray:
    return a.astype(dtype) if a.dtype.kind == "f" else a


def test_every_op_has_a_reference() -> None:
    # The nn ops (conv, pooling, norms, dropout) have loop references in test_nn_ops.py.
    missing = sorted(
        op.name
        for op in _non_leaf_ops()
        if op.name not in REFERENCES and op.family not in ("conv", "pool", "norm", "random")
    )
    assert not missing, f"add a numpy reference to REFERENCES for: {missing}"


def test_every_op_has_cases() -> None:
    empty = [op.name for op in _non_leaf_ops() if op.cases is None]
    assert not empty


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("op", "case"), OP_CASES, ids=[_case_id(c) for c in OP_CASES])
def test_op_value_matches_reference(op: OpDef, case: OpCase, dtype: str) -> None:
    arrays = [_as(dtype, np.asarray(a)) for a in case.inputs]
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    out = g.apply(op.name, xs, dict(case.attrs))
    (got,) = compile([out])({f"x{i}": a for i, a in enumerate(arrays)})

    # Inference agrees with what the kernel (and the CPU backend) produce.
    direct = np.asarray(op.kernel(*arrays, **case.attrs))
    assert got.shape == out.shape == direct.shape
    assert got.dtype.name == out.dtype == direct.dtype.name

    # The reference runs in float64 on the same (possibly rounded) inputs.
    ref_inputs = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    expected = np.asarray(REFERENCES[op.name](*ref_inputs, **case.attrs))
    assert expected.shape == got.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected.astype(got.dtype))
    elif dtype == "float64" and all(a.dtype != np.float32 for a in ref_inputs):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    else:
        rtol, atol = op.tolerance
        np.testing.assert_allclose(got, expected, rtol=max(rtol, 1e-6), atol=max(atol, 1e-6))
