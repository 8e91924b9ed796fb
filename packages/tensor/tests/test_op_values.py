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


def _var(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    return np.asarray(((x - mu) ** 2).mean(axis=axis, keepdims=keepdims))


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
    "pow": lambda a, b: np.exp(b * np.log(a)),
    "maximum": lambda a, b: a * (a >= b) + b * (a < b),
    "minimum": lambda a, b: a * (a <= b) + b * (a > b),
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "where": lambda c, a, b: c * a + (1 - c) * b,
    # reductions
    "sum": lambda x, axis, keepdims=False: x.sum(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims=False: (
        x.sum(axis=axis, keepdims=keepdims) / math.prod(x.shape[a] for a in axis)
    ),
    "max": lambda x, axis, keepdims=False: np.amax(x, axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims=False: -np.amax(-x, axis=axis, keepdims=keepdims),
    "var": _var,
    "argmax": _argmax,
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


# -- issue 13 (shape, index, linalg ops): references written apart from the kernels ------
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
