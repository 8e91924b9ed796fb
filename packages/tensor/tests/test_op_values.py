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


def _scan_parts(
    *ins: np.ndarray, loop: Any, save: bool, reverse: bool, **_: Any
) -> list[np.ndarray]:
    """The registry's scan cases written out: a tanh RNN step and a cumulative sum."""
    carry, xs = ins[0], ins[1]
    finals, ys, saved = carry, [None] * len(xs), [None] * len(xs)
    for t in range(len(xs) - 1, -1, -1) if reverse else range(len(xs)):
        saved[t] = finals
        if loop.name == "rnn":
            finals = np.tanh(finals @ ins[2] + xs[t])
            ys[t] = np.sin(finals) * 2.0
        else:
            finals = finals + xs[t]
            ys[t] = finals * finals
    parts = [finals, np.stack(ys)] + ([np.stack(saved)] if save else [])
    return parts


def _scan_ref(*ins: np.ndarray, **attrs: Any) -> np.ndarray:
    return np.concatenate([p.reshape(-1) for p in _scan_parts(*ins, **attrs)])


def _scan_part_ref(packed: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    shapes = [p.shape for p in _scan_parts(*ins, **attrs)]
    start = sum(int(np.prod(s)) for s in shapes[:part])
    return packed[start : start + int(np.prod(shapes[part]))].reshape(shapes[part])


def _scan_unpart_ref(value: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    shapes = [p.shape for p in _scan_parts(*ins, **attrs)]
    pieces = [np.zeros(s) if i != part else value for i, s in enumerate(shapes)]
    return np.concatenate([p.reshape(-1) for p in pieces])


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
    # elementwise: rounding, tests, logic, integers
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
    # scans and sorts
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
    # control flow
    "scan": _scan_ref,
    "scan_part": _scan_part_ref,
    "scan_unpart": _scan_unpart_ref,
}

# Activations that expand into other ops (tensor/ops/elementwise_activation.py).
_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


def _softplus1(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))))


def _reference_prelu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    shaped = w.reshape((-1,) + (1,) * (x.ndim - 2)) if x.ndim >= 2 else w
    return np.asarray(np.maximum(x, 0.0) + shaped * np.minimum(x, 0.0))


def _reference_glu(x: np.ndarray, axis: int = -1) -> np.ndarray:
    half = x.shape[axis] // 2
    a = np.take(x, np.arange(half), axis=axis)
    b = np.take(x, np.arange(half, 2 * half), axis=axis)
    return np.asarray(a / (1.0 + np.exp(-b)))


REFERENCES.update(
    {
        "mish": lambda x: x * np.tanh(_softplus1(x)),
        "hardswish": lambda x: np.where(x <= -3, 0.0, np.where(x >= 3, x, x * (x + 3) / 6)),
        "hardsigmoid": lambda x: np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, x / 6 + 0.5)),
        "relu6": lambda x: np.minimum(np.maximum(x, 0.0), 6.0),
        "hardtanh": lambda x, min_val, max_val: np.minimum(np.maximum(x, min_val), max_val),
        "selu": lambda x: _SELU[1] * np.where(x > 0, x, _SELU[0] * (np.exp(x) - 1.0)),
        "celu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x / alpha) - 1.0)),
        "softsign": lambda x: x / (1.0 + np.abs(x)),
        "logsigmoid": lambda x: -_softplus1(-x),
        "tanhshrink": lambda x: x - np.tanh(x),
        "softshrink": lambda x, lambd=0.5: np.where(
            x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0)
        ),
        "hardshrink": lambda x, lambd=0.5: np.where((x > lambd) | (x < -lambd), x, 0.0),
        "threshold": lambda x, threshold, value: np.where(x > threshold, x, value),
        "glu": _reference_glu,
        "prelu": _reference_prelu,
    }
)


# Normalisations and distances that expand into other ops (tensor/ops/norm_groups.py).
def _reference_group_norm(
    x: np.ndarray, *affine: np.ndarray, num_groups: int, eps: float = 1e-5
) -> np.ndarray:
    out = np.empty_like(x)
    per = x.shape[1] // num_groups
    for n in range(x.shape[0]):
        for k in range(num_groups):
            part = x[n, k * per : (k + 1) * per]
            out[n, k * per : (k + 1) * per] = (part - part.mean()) / np.sqrt(part.var() + eps)
    if affine:
        shape = (-1,) + (1,) * (x.ndim - 2)
        out = out * affine[0].reshape(shape) + affine[1].reshape(shape)
    return out


def _reference_rms_norm(
    x: np.ndarray, *weight: np.ndarray, normalized_shape: tuple[int, ...], eps: float | None = None
) -> np.ndarray:
    flat = x.reshape(-1, int(np.prod(normalized_shape)))
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    rms = np.sqrt((flat**2).sum(axis=1) / flat.shape[1] + eps)
    out = (flat / rms[:, None]).reshape(x.shape)
    return out * weight[0] if weight else out


def _reference_norm(v: np.ndarray, p: float, axis: int, keepdims: bool) -> np.ndarray:
    return np.asarray(np.linalg.norm(v, ord=p, axis=axis, keepdims=keepdims))


def _reference_cosine(a: np.ndarray, b: np.ndarray, axis: int = 1, eps: float = 1e-8) -> Any:
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    na = np.maximum(_reference_norm(a, 2, axis, False), eps)
    nb = np.maximum(_reference_norm(b, 2, axis, False), eps)
    return np.einsum("...i,...i->...", np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)) / (
        na * nb
    )


REFERENCES.update(
    {
        "group_norm": _reference_group_norm,
        "rms_norm": _reference_rms_norm,
        "normalize": lambda x, p=2.0, axis=1, eps=1e-12: (
            x / np.maximum(_reference_norm(x, p, axis, True), eps)
        ),
        "cosine_similarity": _reference_cosine,
        "pairwise_distance": lambda a, b, p=2.0, eps=1e-6, keepdim=False: _reference_norm(
            np.broadcast_to(a - b + eps, np.broadcast_shapes(a.shape, b.shape)), p, -1, keepdim
        ),
    }
)


# -- shape, index and linalg ops: references written apart from the kernels ----------------
def _take_each(x: np.ndarray, maps: dict[int, np.ndarray]) -> np.ndarray:
    for axis, idx in maps.items():
        x = np.take(x, idx, axis=axis)
    return x


def _ref_roll(x: np.ndarray, shift: tuple[int, ...], axis: tuple[int, ...] | None) -> np.ndarray:
    if axis is None:
        n = x.size
        return x.reshape(-1)[(np.arange(n) - shift[0]) % n].reshape(x.shape)
    for s, a in zip(shift, axis, strict=True):
        n = x.shape[a]
        x = np.take(x, (np.arange(n) - s) % n, axis=a)
    return x


def _ref_tri(x: np.ndarray, diagonal: int, upper: bool) -> np.ndarray:
    n, m = x.shape[-2:]
    keep = np.array(
        [
            [(j - i >= diagonal) if upper else (j - i <= diagonal) for j in range(m)]
            for i in range(n)
        ],
        dtype=bool,
    ).reshape(n, m)
    return x * keep


def _ref_diagonal(x: np.ndarray, offset: int, axis1: int, axis2: int) -> np.ndarray:
    y = np.moveaxis(x, (axis1, axis2), (-2, -1))
    n, m = y.shape[-2:]
    pairs = [(i, i + offset) for i in range(n) if 0 <= i + offset < m]
    return np.stack([y[..., i, j] for i, j in pairs], axis=-1) if pairs else y[..., 0, :0]


def _ref_repeat(x: np.ndarray, repeats: tuple[int, ...]) -> np.ndarray:
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    pairs = enumerate(zip(x.shape, repeats, strict=True))
    maps = {a: np.arange(n * r) % max(n, 1) for a, (n, r) in pairs}
    return _take_each(x, maps)


def _ref_repeat_interleave(x: np.ndarray, repeats: tuple[int, ...], axis: int) -> np.ndarray:
    n = x.shape[axis]
    reps = repeats * n if len(repeats) == 1 else repeats
    idx = [i for i in range(n) for _ in range(reps[i])]
    return np.take(x, np.asarray(idx, np.int64), axis=axis)


def _ref_unfold(x: np.ndarray, axis: int, size: int, step: int) -> np.ndarray:
    axis %= x.ndim
    n = x.shape[axis]
    windows = [np.take(x, np.arange(s, s + size), axis=axis) for s in range(0, n - size + 1, step)]
    return np.moveaxis(np.stack(windows, axis=axis), axis + 1, -1)


def _ref_take_along(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    moved_x, moved_i = np.moveaxis(x, axis, -1), np.moveaxis(idx, axis, -1)
    out = np.empty(moved_i.shape, x.dtype)
    for pos in np.ndindex(*moved_i.shape):
        out[pos] = moved_x[(*pos[:-1], moved_i[pos])]
    return np.moveaxis(out, -1, axis)


def _ref_scatter(
    x: np.ndarray, idx: np.ndarray, src: np.ndarray, axis: int, reduce: str, include_self: bool
) -> np.ndarray:
    moved_x, moved_i = np.moveaxis(x, axis, -1), np.moveaxis(idx, axis, -1)
    moved_s = np.moveaxis(src, axis, -1)
    groups: dict[tuple[int, ...], list[float]] = {}
    for pos in np.ndindex(*moved_i.shape):
        groups.setdefault((*pos[:-1], int(moved_i[pos])), []).append(moved_s[pos])
    out = moved_x.copy()
    combine = {"sum": sum, "prod": math.prod, "mean": np.mean, "amax": max, "amin": min}
    for pos, values in groups.items():
        values = ([moved_x[pos]] if include_self else []) + values
        out[pos] = combine[reduce](values)
    return np.moveaxis(out, -1, axis)


def _ref_pad(
    x: np.ndarray, pad: tuple[tuple[int, int], ...], mode: str, value: float
) -> np.ndarray:
    for axis, (before, after) in enumerate(pad):
        if mode == "circular":  # PyTorch crops first, then wraps what is left
            x = np.take(x, np.arange(max(-before, 0), x.shape[axis] - max(-after, 0)), axis=axis)
            before, after = max(before, 0), max(after, 0)
        n = x.shape[axis]
        pieces = []
        for i in range(-before, n + after):
            j = i
            if mode == "reflect":
                while not 0 <= j < n:
                    j = -j if j < 0 else 2 * (n - 1) - j
            elif mode == "circular":
                j = i % n
            elif mode == "replicate":
                j = min(max(i, 0), n - 1)
            piece = np.take(x, [min(max(j, 0), n - 1)], axis=axis)
            pieces.append(piece if 0 <= j < n else np.full_like(piece, value))
        x = np.concatenate(pieces, axis=axis)
    return x


def _ref_einsum(*xs: np.ndarray, equation: str) -> np.ndarray:
    # optimize=True takes another path through numpy (pairwise tensordot) than the kernel
    return np.asarray(np.einsum(equation, *xs, optimize=True))


REFERENCES.update(
    {
        "flip": lambda x, axis: _take_each(x, {a: np.arange(x.shape[a])[::-1] for a in axis}),
        "roll": _ref_roll,
        "tril": lambda x, diagonal: _ref_tri(x, diagonal, upper=False),
        "triu": lambda x, diagonal: _ref_tri(x, diagonal, upper=True),
        "diagonal": _ref_diagonal,
        "repeat": _ref_repeat,
        "repeat_interleave": _ref_repeat_interleave,
        "unfold": _ref_unfold,
        "take_along_axis": _ref_take_along,
        "scatter_add_along": lambda g, idx, x, axis: _ref_scatter(
            np.zeros(x.shape, g.dtype), idx, g, axis, "sum", True
        ),
        "scatter_reduce": _ref_scatter,
        "pad": _ref_pad,
        "einsum": _ref_einsum,
        "cross": lambda a, b, axis: np.moveaxis(
            np.cross(np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)), -1, axis
        ),
    }
)


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
        if op.name not in REFERENCES
        and (op.family not in ("conv", "pool", "norm", "random") or not op.primitive)
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
    xs = [g.input(f"x{i}", a.shape, a.dtype.name, free=()) for i, a in enumerate(arrays)]
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


# 1-D convolution and pooling (tensor/ops/conv_1d.py, pool_1d.py): direct loops.
def _reference_conv1d(
    x: np.ndarray,
    w: np.ndarray,
    *b: np.ndarray,
    stride: int,
    padding: int,
    dilation: int,
    groups: int,
) -> np.ndarray:
    n, _, length = x.shape
    o, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, out_len))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for t in range(out_len):
            taps = xp[:, g * cg : (g + 1) * cg, t * stride : t * stride + dilation * k : dilation]
            out[:, oc, t] = np.sum(taps * w[oc], axis=(1, 2))
    return out + b[0][None, :, None] if b else out


def _reference_conv_transpose1d(
    x: np.ndarray,
    w: np.ndarray,
    *b: np.ndarray,
    stride: int,
    padding: int,
    dilation: int,
    groups: int,
    output_padding: int,
) -> np.ndarray:
    n, c, length = x.shape
    _, og, k = w.shape
    full = (length - 1) * stride + dilation * (k - 1) + 1 + output_padding
    out = np.zeros((n, og * groups, full))
    per = c // groups
    for ic in range(c):
        g = ic // per
        for t in range(length):
            for j in range(k):
                out[:, g * og : (g + 1) * og, t * stride + j * dilation] += (
                    x[:, ic, t, None] * w[ic, :, j]
                )
    out = out[:, :, padding : full - padding]
    return out + b[0][None, :, None] if b else out


def _windows(length: int, kernel: int, stride: int, padding: int) -> list[range]:
    count = (length + 2 * padding - kernel) // stride + 1
    return [range(t * stride - padding, t * stride - padding + kernel) for t in range(count)]


def _reference_max_pool1d(x: np.ndarray, kernel_size: int, stride: int, padding: int) -> Any:
    cols = [
        np.max(x[:, :, [i for i in r if 0 <= i < x.shape[2]]], axis=2)
        for r in _windows(x.shape[2], kernel_size, stride, padding)
    ]
    return np.stack(cols, axis=2)


def _reference_avg_pool1d(
    x: np.ndarray, kernel_size: int, stride: int, padding: int, count_include_pad: bool
) -> Any:
    cols = []
    for r in _windows(x.shape[2], kernel_size, stride, padding):
        inside = [i for i in r if 0 <= i < x.shape[2]]
        cols.append(
            np.sum(x[:, :, inside], axis=2) / (kernel_size if count_include_pad else len(inside))
        )
    return np.stack(cols, axis=2)


def _reference_adaptive_avg_pool1d(x: np.ndarray, output_size: int) -> Any:
    length = x.shape[2]
    return np.stack(
        [
            x[:, :, i * length // output_size : -(-(i + 1) * length // output_size)].mean(axis=2)
            for i in range(output_size)
        ],
        axis=2,
    )


REFERENCES.update(
    {
        "conv1d": _reference_conv1d,
        "conv_transpose1d": _reference_conv_transpose1d,
        "max_pool1d": _reference_max_pool1d,
        "avg_pool1d": _reference_avg_pool1d,
        "adaptive_avg_pool1d": _reference_adaptive_avg_pool1d,
    }
)


# Resampling, pixel shuffle and attention (pool_resize.py, shape_pixel.py,
# linalg_attention.py): element by element, PyTorch's formulas.
def _source_1d(mode: str, n: int, m: int, j: int, corners: bool, scale: float | None) -> Any:
    step = ((n - 1) / (m - 1) if m > 1 else 0.0) if corners else (1.0 / scale if scale else n / m)
    if mode.startswith("nearest"):
        shift = 0.5 if mode == "nearest-exact" else 0.0
        return [(min(math.floor((j + shift) * step), n - 1), 1.0)]
    src = j * step if corners else (j + 0.5) * step - 0.5
    if mode == "bicubic":
        i, t, a = math.floor(src), src - math.floor(src), -0.75

        def w(d: float) -> float:  # Keys' cubic convolution kernel
            d = abs(d)
            if d <= 1:
                return ((a + 2) * d - (a + 3)) * d * d + 1
            return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a if d < 2 else 0.0

        return [(min(max(i + k, 0), n - 1), w(t - k)) for k in (-1, 0, 1, 2)]
    src = max(src, 0.0)
    i = min(math.floor(src), n - 1)
    return [(i, 1.0 - (src - i)), (min(i + 1, n - 1), src - i)]


def _reference_interpolate(x: np.ndarray, **attrs: Any) -> np.ndarray:
    out = x
    scales = attrs.get("scales") or (None,) * len(attrs["size"])
    for k, (m, scale) in enumerate(zip(attrs["size"], scales, strict=True)):
        axis, n = 2 + k, out.shape[2 + k]
        moved = np.moveaxis(out, axis, -1)
        result = np.zeros((*moved.shape[:-1], m))
        for j in range(m):
            for i, weight in _source_1d(
                attrs["mode"], n, m, j, bool(attrs.get("align_corners")), scale
            ):
                result[..., j] += moved[..., i] * weight
        out = np.moveaxis(result, -1, axis)
    return out


def _reference_pixel_shuffle(x: np.ndarray, upscale_factor: int) -> np.ndarray:
    n, c, h, w = x.shape
    r = upscale_factor
    out = np.zeros((n, c // (r * r), h * r, w * r))
    for ch in range(c):
        oc, dy, dx = ch // (r * r), (ch % (r * r)) // r, ch % r
        out[:, oc, dy::r, dx::r] = x[:, ch]
    return out


def _reference_pixel_unshuffle(x: np.ndarray, downscale_factor: int) -> np.ndarray:
    n, c, h, w = x.shape
    r = downscale_factor
    out = np.zeros((n, c * r * r, h // r, w // r))
    for ch in range(c * r * r):
        ic, dy, dx = ch // (r * r), (ch % (r * r)) // r, ch % r
        out[:, ch] = x[:, ic, dy::r, dx::r]
    return out


def _reference_sdpa(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *mask: np.ndarray, **a: Any
) -> Any:
    scale = a.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("...le,...se->...ls", q, k) * scale
    if a.get("is_causal"):
        scores = scores + np.triu(np.full(scores.shape[-2:], -np.inf), 1)
    if mask:
        scores = scores + (np.where(mask[0], 0.0, -np.inf) if mask[0].dtype == bool else mask[0])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("...ls,...sd->...ld", weights / weights.sum(axis=-1, keepdims=True), v)


REFERENCES.update(
    {
        "interpolate": _reference_interpolate,
        "pixel_shuffle": _reference_pixel_shuffle,
        "pixel_unshuffle": _reference_pixel_unshuffle,
        "scaled_dot_product_attention": _reference_sdpa,
    }
)


# Pooling with PyTorch's window options (pool_window.py): window by window.
def _pool_windows(shape: tuple[int, ...], a: dict[str, Any]) -> Any:
    kernel, stride, padding = a["kernel_size"], a["stride"], a["padding"]
    dilation, ceil = a.get("dilation", (1, 1)), a.get("ceil_mode", False)
    sizes = []
    for i in range(2):
        n = shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1
        out = -(-n // stride[i]) + 1 if ceil else n // stride[i] + 1
        if ceil and (out - 1) * stride[i] >= shape[2 + i] + padding[i]:
            out -= 1
        sizes.append(out)
    for oh in range(sizes[0]):
        for ow in range(sizes[1]):
            rows = [oh * stride[0] - padding[0] + i * dilation[0] for i in range(kernel[0])]
            cols = [ow * stride[1] - padding[1] + j * dilation[1] for j in range(kernel[1])]
            yield oh, ow, rows, cols, sizes


def _reference_max_pool_general(x: np.ndarray, **a: Any) -> np.ndarray:
    out: np.ndarray | None = None
    for oh, ow, rows, cols, sizes in _pool_windows(x.shape, a):
        if out is None:
            out = np.zeros((*x.shape[:2], *sizes))
        taps = [
            x[:, :, r, c] for r in rows for c in cols if 0 <= r < x.shape[2] and 0 <= c < x.shape[3]
        ]
        out[:, :, oh, ow] = np.max(np.stack(taps), axis=0)
    assert out is not None
    return out


def _reference_max_pool_indices(x: np.ndarray, **a: Any) -> np.ndarray:
    out: np.ndarray | None = None
    for oh, ow, rows, cols, sizes in _pool_windows(x.shape, a):
        if out is None:
            out = np.zeros((*x.shape[:2], *sizes), dtype=np.int64)
        inside = [(r, c) for r in rows for c in cols if 0 <= r < x.shape[2] and 0 <= c < x.shape[3]]
        values = np.stack([x[:, :, r, c] for r, c in inside])
        best = np.argmax(values, axis=0)
        flat = np.array([r * x.shape[3] + c for r, c in inside])
        out[:, :, oh, ow] = flat[best]
    assert out is not None
    return out


def _reference_avg_pool_general(x: np.ndarray, **a: Any) -> np.ndarray:
    out: np.ndarray | None = None
    h, w = x.shape[2:]
    for oh, ow, rows, cols, sizes in _pool_windows(x.shape, a):
        if out is None:
            out = np.zeros((*x.shape[:2], *sizes))
        inside = [(r, c) for r in rows for c in cols if 0 <= r < h and 0 <= c < w]
        total = sum(x[:, :, r, c] for r, c in inside)
        # PyTorch: the window clipped to the padded input (not the ceil overhang)
        rh = len([r for r in rows if r < h + a["padding"][0]])
        rw = len([c for c in cols if c < w + a["padding"][1]])
        if a.get("divisor_override"):
            divisor = a["divisor_override"]
        elif a.get("count_include_pad", True):
            divisor = rh * rw
        else:
            divisor = len(inside)
        out[:, :, oh, ow] = total / divisor
    assert out is not None
    return out


REFERENCES.update(
    {
        "max_pool2d_general": _reference_max_pool_general,
        "max_pool2d_indices": _reference_max_pool_indices,
        "avg_pool2d_general": _reference_avg_pool_general,
    }
)


# 3-D convolution and pooling (conv_3d.py, pool_3d.py): output by output.
def _triple(v: Any) -> tuple[int, int, int]:
    return (v, v, v) if isinstance(v, int) else tuple(v)


def _reference_conv3d(x: np.ndarray, w: np.ndarray, *b: np.ndarray, **a: Any) -> np.ndarray:
    st, pad, dil, groups = (
        _triple(a["stride"]),
        _triple(a["padding"]),
        _triple(a["dilation"]),
        a["groups"],
    )
    xp = np.pad(x, ((0, 0), (0, 0), *((p, p) for p in pad)))
    o, cg = w.shape[:2]
    span = [dil[i] * (w.shape[2 + i] - 1) + 1 for i in range(3)]
    out_shape = [(xp.shape[2 + i] - span[i]) // st[i] + 1 for i in range(3)]
    out = np.zeros((x.shape[0], o, *out_shape))
    per = o // groups
    for oc in range(o):
        c0 = (oc // per) * cg
        for idx in np.ndindex(*out_shape):
            sl = tuple(slice(idx[i] * st[i], idx[i] * st[i] + span[i], dil[i]) for i in range(3))
            out[(slice(None), oc, *idx)] = np.sum(
                xp[(slice(None), slice(c0, c0 + cg), *sl)] * w[oc], axis=(1, 2, 3, 4)
            )
    return out + b[0].reshape(-1, 1, 1, 1) if b else out


def _pool3d_reference(x: np.ndarray, a: dict[str, Any], reduce: str) -> np.ndarray:
    k = _triple(a["kernel_size"])
    st = k if a.get("stride") is None else _triple(a["stride"])
    pad = _triple(a.get("padding", 0))
    out_shape = [(x.shape[2 + i] + 2 * pad[i] - k[i]) // st[i] + 1 for i in range(3)]
    out = np.zeros((*x.shape[:2], *out_shape))
    for idx in np.ndindex(*out_shape):
        lo = [idx[i] * st[i] - pad[i] for i in range(3)]
        sl = tuple(slice(max(lo[i], 0), min(lo[i] + k[i], x.shape[2 + i])) for i in range(3))
        window = x[(slice(None), slice(None), *sl)]
        if reduce == "max":
            out[(slice(None), slice(None), *idx)] = window.max(axis=(2, 3, 4))
        else:
            count = int(np.prod(k)) if a.get("count_include_pad", True) else window[0, 0].size
            out[(slice(None), slice(None), *idx)] = window.sum(axis=(2, 3, 4)) / count
    return out


def _reference_adaptive3d(x: np.ndarray, output_size: Any) -> np.ndarray:
    size = _triple(output_size)
    out = np.zeros((*x.shape[:2], *size))
    for idx in np.ndindex(*size):
        sl = tuple(
            slice(idx[i] * x.shape[2 + i] // size[i], -(-(idx[i] + 1) * x.shape[2 + i] // size[i]))
            for i in range(3)
        )
        out[(slice(None), slice(None), *idx)] = x[(slice(None), slice(None), *sl)].mean(
            axis=(2, 3, 4)
        )
    return out


def _reference_conv_transpose3d(x: np.ndarray, w: np.ndarray, *b: np.ndarray, **a: Any) -> Any:
    st, pad, dil = _triple(a["stride"]), _triple(a["padding"]), _triple(a["dilation"])
    extra, groups = _triple(a["output_padding"]), a["groups"]
    cin, og = w.shape[:2]
    full = [
        (x.shape[2 + i] - 1) * st[i] + dil[i] * (w.shape[2 + i] - 1) + 1 + extra[i]
        for i in range(3)
    ]
    out = np.zeros((x.shape[0], og * groups, *full))
    per = cin // groups
    for ic in range(cin):
        oc0 = (ic // per) * og
        for idx in np.ndindex(*x.shape[2:]):
            for kidx in np.ndindex(*w.shape[2:]):
                pos = tuple(idx[i] * st[i] + kidx[i] * dil[i] for i in range(3))
                out[(slice(None), slice(oc0, oc0 + og), *pos)] += (
                    x[(slice(None), ic, *idx)][:, None] * w[(ic, slice(None), *kidx)]
                )
    crop = tuple(slice(pad[i], full[i] - pad[i]) for i in range(3))
    out = out[(slice(None), slice(None), *crop)]
    return out + b[0].reshape(-1, 1, 1, 1) if b else out


REFERENCES.update(
    {
        "conv_transpose3d": _reference_conv_transpose3d,
        "conv3d": _reference_conv3d,
        "max_pool3d": lambda x, **a: _pool3d_reference(x, a, "max"),
        "avg_pool3d": lambda x, **a: _pool3d_reference(x, a, "mean"),
        "adaptive_avg_pool3d": _reference_adaptive3d,
    }
)


def _reference_max_unpool2d(x: np.ndarray, indices: np.ndarray, output_size: Any) -> Any:
    out = np.zeros((*x.shape[:2], *output_size))
    for n, c, r, q in np.ndindex(*x.shape):
        at = int(indices[n, c, r, q])
        out[n, c, at // output_size[1], at % output_size[1]] = x[n, c, r, q]
    return out


REFERENCES["max_unpool2d"] = _reference_max_unpool2d
